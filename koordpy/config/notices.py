"""What a configuration that loads still has to tell its user: the plugins left out, and the
settings koordpy does not act on. Each kind is one message, however many items it names."""

from __future__ import annotations

from dataclasses import dataclass

from koordpy.config.known_plugins import ALLOW_UNSUPPORTED_FLAG, known


def _summary(name: str) -> str:
    plugin = known(name)
    return plugin.summary if plugin is not None else name


@dataclass(frozen=True, slots=True)
class Notices:
    # plugins koordpy does not support, left out because the user allowed it
    skipped: tuple[str, ...] = ()
    # plugins accepted without effect (config.known_plugins, INERT)
    inert: tuple[str, ...] = ()
    # `path: what koordpy does instead` of every setting it does not act on
    unhonoured: tuple[str, ...] = ()
    # the points (`profiles[0].plugins.queueSort`) where the only plugins named were left out, so
    # that koordpy's defaults stand in
    stand_ins: tuple[str, ...] = ()

    def warnings(self) -> list[str]:
        out = []
        if self.skipped:
            stand_in = (
                f"; koordpy's default plugins stand in at {', '.join(self.stand_ins)}"
                if self.stand_ins
                else ""
            )
            out.append(
                f"left out {len(self.skipped)} plugin(s) koordpy does not support "
                f"({ALLOW_UNSUPPORTED_FLAG}), scheduling without them{stand_in}: "
                + "; ".join(_summary(name) for name in self.skipped)
            )
        if self.unhonoured:
            out.append("settings koordpy does not act on: " + "; ".join(self.unhonoured))
        return out

    def info(self) -> list[str]:
        if not self.inert:
            return []
        return [
            "accepted without effect (they change no placement): "
            + "; ".join(_summary(name) for name in self.inert)
        ]
