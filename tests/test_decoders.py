"""Decoders of wire types built on many threads at once (bot/decoders.py).

msgspec publishes a struct type's decoding information on the class before it is complete; a thread
that decodes with it meanwhile crashes the process (SIGSEGV). `/upgrade check --fleet` did, with
twenty clusters' pods decoded on eight threads. The script below builds a fresh pod type per round
(as `pod_schema` does per set of rule keys) and has eight threads meet it at once, with the
interpreter switching threads as often as it can. With `msgspec.json.Decoder` in place of
`decoder` it died within the first rounds here; it runs in its own process, so that a crash fails
this test instead of killing the test worker.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

SCRIPT = textwrap.dedent(
    """
    import sys, threading
    from bot.adapters.kube.decoding import _ListBody
    from bot.core.checks import schema
    from bot.decoders import convert, decoder

    sys.setswitchinterval(1e-6)
    pod = (
        b'{"metadata":{"name":"p","labels":{"k":"v"},"annotations":{"a":"x"}},'
        b'"spec":{"nodeName":"n","containers":[{"name":"c","image":"i"}]},'
        b'"status":{"phase":"Running","containerStatuses":[{"name":"c","ready":true,"restartCount":1}]}}'
    )
    page = b'{"metadata":{"resourceVersion":"1"},"items":[' + b",".join([pod] * 50) + b"]}"
    as_dict = {"metadata": {"name": "p", "labels": {"k": "v"}}, "spec": {"nodeName": "n"}}
    decoded = 0
    for r in range(150):
        shape = schema.pod_schema.__wrapped__(frozenset({f"k{r}", "app"}), frozenset({f"a{r}"}))
        barrier = threading.Barrier(8)

        def meet(i):
            global decoded
            barrier.wait()
            if i % 2:
                body = decoder(_ListBody[shape.pod]).decode(page)
                assert len(body.items) == 50
            else:
                assert convert(as_dict, shape.pod).spec.node_name == "n"
            decoded += 1

        threads = [threading.Thread(target=meet, args=(i,)) for i in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    print("decoded", decoded)
    """
)


def test_decoders_of_a_new_type_built_on_eight_threads_at_once_do_not_crash_the_process() -> None:
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT], cwd=ROOT, capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, f"exit {done.returncode}: {done.stderr[-2000:]}"
    assert done.stdout.strip() == "decoded 1200"
