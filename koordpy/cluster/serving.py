"""The certificate of the secure port, chosen as kube-scheduler chooses it (apiserver's
SecureServingOptions.MaybeDefaultWithSelfSignedCerts):

1. `--tls-cert-file` and `--tls-private-key-file`, both or neither; the files are read again when
   they change on disk, so a certificate rotated in place (cert-manager, a mounted Secret) is served
   from the next connection on without a restart;
2. else, with `--cert-dir`, `<cert-dir>/koordpy.crt` and `.key`: used when they can be read,
   generated and written there when not (and then kept across restarts);
3. else a self-signed certificate generated at start-up, kept in memory only.

A generated certificate is kube's: a CA of its own (`localhost-ca@<unix time>`) signing a serving
certificate (`localhost@<unix time>`) for `localhost`, 127.0.0.1 and the bind address, RSA 2048,
valid from an hour ago (clock skew) for a year; the certificate file holds the serving certificate
then the CA.
"""

from __future__ import annotations

import asyncio
import datetime
import ipaddress
import logging
import os
import ssl
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from koordpy import logs

log = logging.getLogger(__name__)
klog = logs.get(__name__)

# kube-scheduler's PairName is kube-scheduler: the files in --cert-dir are named after the component
PAIR_NAME = "koordpy"
# kube-scheduler's MaybeDefaultWithSelfSignedCerts("localhost", nil, [127.0.0.1])
PUBLIC_ADDRESS = "localhost"
LOOPBACK = "127.0.0.1"
VALIDITY = datetime.timedelta(days=365)
CLOCK_SKEW = datetime.timedelta(hours=1)
RSA_BITS = 2048
# how often a certificate given as files is checked for a change on disk
RELOAD_SECONDS = 60.0


class CertificateError(Exception):
    """The serving certificate cannot be had: files missing or unreadable, a key that does not fit."""


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def generate_self_signed(
    host: str,
    alternate_ips: Sequence[str] = (),
    alternate_dns: Sequence[str] = (),
    now: datetime.datetime | None = None,
) -> tuple[bytes, bytes]:
    """PEM of a serving certificate followed by the CA that signed it, and PEM of its key (PKCS#1),
    as client-go's GenerateSelfSignedCertKey makes them."""
    moment = now or datetime.datetime.now(datetime.UTC)
    valid_from = moment - CLOCK_SKEW
    stamp = int(moment.timestamp())
    ca_key = rsa.generate_private_key(public_exponent=65537, key_size=RSA_BITS)
    ca_name = _name(f"{host}-ca@{stamp}")
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(1)
        .not_valid_before(valid_from)
        .not_valid_after(valid_from + VALIDITY)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=True,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .sign(ca_key, hashes.SHA256())
    )
    key = rsa.generate_private_key(public_exponent=65537, key_size=RSA_BITS)
    ips: list[x509.GeneralName] = []
    names: list[x509.GeneralName] = []
    try:
        ips.append(x509.IPAddress(ipaddress.ip_address(host)))
    except ValueError:
        names.append(x509.DNSName(host))
    ips += [x509.IPAddress(ipaddress.ip_address(ip)) for ip in alternate_ips]
    names += [x509.DNSName(name) for name in alternate_dns]
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name(f"{host}@{stamp}"))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(2)
        .not_valid_before(valid_from)
        .not_valid_after(valid_from + VALIDITY)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=True,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=False,
                crl_sign=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.SubjectAlternativeName([*names, *ips]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    chain = cert.public_bytes(serialization.Encoding.PEM) + ca.public_bytes(serialization.Encoding.PEM)
    key_pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.TraditionalOpenSSL,
        serialization.NoEncryption(),
    )
    return chain, key_pem


def subject_alternatives(bind_address: str) -> tuple[list[str], list[str]]:
    """The IPs and DNS names a generated certificate names besides `localhost`: 127.0.0.1, and the
    bind address unless it is the unspecified one (then `localhost` once more, as kube does)."""
    ips, dns = [LOOPBACK], []
    try:
        address = ipaddress.ip_address(bind_address)
    except ValueError:
        address = None
    if address is None or address.is_unspecified:
        dns.append(PUBLIC_ADDRESS)
    elif str(address) != LOOPBACK:
        ips.append(str(address))
    return ips, dns


def _server_context() -> ssl.SSLContext:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    # kube's default --tls-min-version
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    return context


def _load(context: ssl.SSLContext, cert_file: str, key_file: str) -> None:
    try:
        context.load_cert_chain(cert_file, key_file)
    except (OSError, ssl.SSLError) as err:
        raise CertificateError(
            f"cannot load the serving certificate {cert_file} / {key_file}: {err}"
        ) from err


def _load_pem(context: ssl.SSLContext, chain: bytes, key: bytes) -> None:
    # the ssl module loads certificates from files only: a private directory, gone once loaded
    with tempfile.TemporaryDirectory(prefix="koordpy-serving-") as directory:
        cert_file, key_file = Path(directory, "tls.crt"), Path(directory, "tls.key")
        for path, data in ((cert_file, chain), (key_file, key)):
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "wb") as out:
                out.write(data)
        _load(context, str(cert_file), str(key_file))


def _readable(*paths: Path) -> bool:
    return all(os.access(p, os.R_OK) and p.is_file() for p in paths)


def _stat(path: str) -> tuple[int, int, int] | None:
    try:
        s = os.stat(path)
    except OSError:
        return None
    return (s.st_mtime_ns, s.st_size, s.st_ino)


@dataclass(slots=True)
class ServingCertificate:
    """The TLS context of the secure port, and where its certificate came from."""

    context: ssl.SSLContext
    # the files served, to be read again when they change; None for a certificate in memory
    cert_file: str | None = None
    key_file: str | None = None
    origin: str = ""
    _seen: tuple[tuple[int, int, int] | None, tuple[int, int, int] | None] = (None, None)

    @staticmethod
    def choose(
        cert_file: str | None, key_file: str | None, cert_dir: str | None, bind_address: str
    ) -> ServingCertificate:
        """The certificate in the order of the module's docstring; raises CertificateError."""
        context = _server_context()
        if cert_file or key_file:
            if not (cert_file and key_file):
                raise CertificateError("--tls-cert-file and --tls-private-key-file must be given together")
            _load(context, cert_file, key_file)
            served = ServingCertificate(context, cert_file, key_file, f"files {cert_file}, {key_file}")
            served._seen = (_stat(cert_file), _stat(key_file))
            return served
        ips, dns = subject_alternatives(bind_address)
        if cert_dir:
            crt, key = Path(cert_dir, f"{PAIR_NAME}.crt"), Path(cert_dir, f"{PAIR_NAME}.key")
            if not _readable(crt, key):
                chain, key_pem = generate_self_signed(PUBLIC_ADDRESS, ips, dns)
                try:
                    Path(cert_dir).mkdir(parents=True, exist_ok=True, mode=0o755)
                    crt.write_bytes(chain)
                    fd = os.open(key, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
                    with os.fdopen(fd, "wb") as out:
                        out.write(key_pem)
                except OSError as err:
                    raise CertificateError(
                        f"cannot write a self-signed certificate to {cert_dir}: {err}"
                    ) from err
                # kube-scheduler's own line (MaybeDefaultWithSelfSignedCerts): files were written
                klog.info("Generated self-signed cert", certFile=str(crt), keyFile=str(key))
            _load(context, str(crt), str(key))
            return ServingCertificate(context, origin=f"directory {cert_dir}")
        chain, key_pem = generate_self_signed(PUBLIC_ADDRESS, ips, dns)
        _load_pem(context, chain, key_pem)
        # nothing to find on disk, and the port is not bound yet: a start that fails on the port
        # says only that at the default verbosity
        if v2 := klog.v(2):
            v2.info("Generated a self-signed serving certificate in memory")
        return ServingCertificate(context, origin="self-signed, in memory")

    def reload_if_changed(self) -> bool:
        """Load the files again when either changed on disk; True when the new pair was taken. A
        pair that does not load (half-written, a key that does not fit) leaves the one in use."""
        if self.cert_file is None or self.key_file is None:
            return False
        seen = (_stat(self.cert_file), _stat(self.key_file))
        if seen == self._seen or None in seen:
            return False
        try:
            _load(self.context, self.cert_file, self.key_file)
        except CertificateError as err:
            log.warning("the changed serving certificate was not taken: %s", err)
            return False
        self._seen = seen
        log.info("serving the changed certificate %s", self.cert_file)
        return True

    async def watch(self, interval: float = RELOAD_SECONDS) -> None:
        """Reload the files when they change, until cancelled."""
        if self.cert_file is None:
            return
        while True:
            await asyncio.sleep(interval)
            try:
                self.reload_if_changed()
            except Exception:  # the certificate in use stays; the next look may fare better
                log.exception("looking for a changed serving certificate failed")
