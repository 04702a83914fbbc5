"""The informers' first lists, asked for while the process is still starting.

At start-up nothing can be scheduled before every informer has listed, and the largest lists (the
pods of a big cluster) take the API server a noticeable time to encode and send. Those requests
need only the credentials, so `FirstLists` sends them from a thread of its own (its own event loop
and client) as soon as the credentials are read, while the main thread goes on importing and
building the scheduler; each informer then takes its answer as its first page instead of asking
again. The thread's wait is the API server's and the network's: it holds no lock the main thread
needs.

Nothing depends on it: a list that failed, or that no informer takes, is simply asked again by
the informer the usual way.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
import threading
import time
from collections.abc import Iterable
from typing import Any

from koordpy.kubeapi.client import KubeApi, RequestObserver
from koordpy.kubeapi.credentials import load_configuration
from koordpy.kubeapi.informer import Resource, list_query

log = logging.getLogger(__name__)

# as long as an informer's own list may take
LIST_TIMEOUT = 120.0

Page = dict[str, Any]
# (method, code, host, seconds): a request made, told to the metrics once they exist
_Observed = tuple[str, str, str, float]


class FirstLists:
    def __init__(
        self,
        resources: Iterable[Resource],
        *,
        kubeconfig: str | None,
        context: str | None,
        master: str | None,
        user_agent: str,
        page_size: int,
    ) -> None:
        self._resources = tuple(dict.fromkeys(resources))
        self._credentials = (kubeconfig, context, master)
        self._user_agent = user_agent
        self._page_size = page_size
        self._pages: dict[Resource, concurrent.futures.Future[Page]] = {
            r: concurrent.futures.Future() for r in self._resources
        }
        # the pages no informer has taken yet (the thread answers every one of `_pages`)
        self._untaken = set(self._resources)
        self._observed: list[_Observed] = []
        self._observe: RequestObserver | None = None
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._main, name="first lists", daemon=True)

    def start(self) -> FirstLists:
        self._thread.start()
        return self

    def take(self, resource: Resource, page_size: int) -> concurrent.futures.Future[Page] | None:
        """The first page of `resource`'s list, once; None when it was not asked for (or was asked
        with another page size, so its answer is not what the informer's first page would be)."""
        if page_size != self._page_size or resource not in self._untaken:
            return None
        self._untaken.discard(resource)
        return self._pages[resource]

    def report_requests(self, observe: RequestObserver | None) -> None:
        """Tell the metrics of the requests made so far, as the main client tells of its own (a
        list that ends later is told when it ends)."""
        with self._lock:
            done, self._observed = self._observed, []
            self._observe = observe
        if observe is not None:
            for method, code, host, seconds in done:
                observe(method, code, host, seconds, None)

    def _record(self, method: str, code: str, host: str, seconds: float | None, _: float | None) -> None:
        with self._lock:
            observe = self._observe
            if observe is None:
                self._observed.append((method, code, host, seconds or 0.0))
                return
        observe(method, code, host, seconds, None)

    def _main(self) -> None:
        try:
            asyncio.run(self._list_all())
        except Exception as err:  # a failed prefetch only costs the informers a request
            self._fail_all(err)

    def _fail_all(self, err: Exception) -> None:
        for future in self._pages.values():
            if not future.done():
                future.set_exception(err)

    async def _list_all(self) -> None:
        kubeconfig, context, master = self._credentials
        started = time.perf_counter()
        try:
            api = KubeApi(await load_configuration(kubeconfig, context, master), user_agent=self._user_agent)
        except Exception as err:
            self._fail_all(err)
            return
        api.observe_request = self._record
        try:
            await asyncio.gather(*(self._list(api, r) for r in self._resources))
        finally:
            await api.close()
        log.debug("first lists of %d resources in %.3fs", len(self._resources), time.perf_counter() - started)

    async def _list(self, api: KubeApi, resource: Resource) -> None:
        future = self._pages[resource]
        try:
            page = await api.request(
                "GET",
                resource.path,
                query=list_query(resource, self._page_size, from_cache=True, cont=""),
                timeout=LIST_TIMEOUT,
            )
        except Exception as err:
            future.set_exception(err)
        else:
            future.set_result(page)
