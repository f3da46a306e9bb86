"""The operator commands against a real injector and node process.

``inject`` (summary, exactly-once re-runs), ``watermarks`` (one-shot and
``--watch``), ``status``, ``state get``, ``deadletters`` (errors when nothing
listens: ``test_client_errors.py``). The commands run in-process through a parser
built from their ``register`` functions; the servers are real processes.
"""

from __future__ import annotations

import io
import json
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from millrace.commands import _inject_progress as progress_line
from millrace.commands import inject, state
from millrace.injector.log import StreamLog
from tests.client_cli import build_parser, cli, write_deployment
from tests.support import ROOT, CollectingSink, InjectorProcess, NodeProcess, free_port, wait_until

pytestmark = pytest.mark.slow

BASE_MS = 1_700_000_000_000
RECORDS = 40
BATCH = 16
POISON_AT = 17  # key k1
MALFORMED_LINES = {6: "not JSON", 22: "missing field(s): value"}


def input_lines() -> list[str]:
    lines = [
        json.dumps(
            {
                "key": f"k{i % 4}",
                "value": "poison" if i == POISON_AT else f"v{i}",
                "ts": BASE_MS + i,
            }
        )
        for i in range(RECORDS)
    ]
    lines.insert(5, "{not json")  # line 6
    lines.insert(21, json.dumps({"key": "x", "ts": 1}))  # line 22: no value
    return lines


def summary_numbers(out: str) -> dict[str, int]:
    patterns = {
        "accepted": r"records accepted:\s+(\d+)",
        "new": r"\((\d+) new",
        "batches": r"batches:\s+(\d+)",
        "replayed": r"\((\d+) replayed\)",
        "malformed": r"malformed lines:\s+(\d+)",
    }
    found = {}
    for name, pattern in patterns.items():
        match = re.search(pattern, out)
        assert match, f"no {name} in {out!r}"
        found[name] = int(match.group(1))
    return found


@dataclass
class Cluster:
    directory: Path
    deployment: Path
    data_file: Path
    sink: CollectingSink
    injector_address: str
    node_address: str
    first_code: int
    first_out: str


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    directory = tmp_path_factory.mktemp("client-commands")
    sink = CollectingSink()
    injector_address = f"127.0.0.1:{free_port()}"
    node_address = f"127.0.0.1:{free_port()}"
    deployment = write_deployment(directory, injector_address, node_address, sink.address)
    data_file = directory / "events.jsonl"
    data_file.write_text("\n".join(input_lines()) + "\n")
    injector = InjectorProcess(deployment, directory / "log", directory / "injector.log")
    node = NodeProcess(deployment, "p", directory / "data", directory)
    injector.start()
    try:
        node.start()
        args = build_parser().parse_args(
            ["inject", "--deployment", str(deployment), "--stream", "events",
             "--batch", str(BATCH), str(data_file)]
        )  # fmt: skip
        out, err = io.StringIO(), io.StringIO()
        code = inject.run(args, out=out, err=err)
        assert err.getvalue() == "", "no progress line when stderr is not a terminal"
        yield Cluster(
            directory, deployment, data_file, sink, injector_address, node_address,
            code, out.getvalue(),
        )  # fmt: skip
    finally:
        node.terminate()
        injector.terminate()
        sink.stop()


def test_inject_reports_the_run_and_a_rerun_duplicates_nothing(
    cluster: Cluster, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cluster.first_code == 0, cluster.first_out
    assert summary_numbers(cluster.first_out) == {
        "accepted": RECORDS, "new": RECORDS, "batches": 3, "replayed": 0, "malformed": 2,
    }  # fmt: skip
    for line, reason in MALFORMED_LINES.items():
        assert re.search(rf"line {line}: {re.escape(reason)}", cluster.first_out), cluster.first_out
    assert re.search(r"seconds:\s+\d+\.\d\d", cluster.first_out)
    expected_values = {f"v{i}".encode() for i in range(RECORDS) if i != POISON_AT}
    wait_until(lambda: len(cluster.sink.records) == len(expected_values), 30, "sink records")
    assert set(cluster.sink.values()) == expected_values

    code, out, err = cli(
        capsys, "inject", "--deployment", str(cluster.deployment), "--stream", "events",
        "--batch", str(BATCH), str(cluster.data_file),
    )  # fmt: skip
    assert code == 0, err
    assert summary_numbers(out) == {
        "accepted": RECORDS, "new": 0, "batches": 3, "replayed": 3, "malformed": 2,
    }  # fmt: skip
    strict, out, err = cli(
        capsys, "inject", "--deployment", str(cluster.deployment), "--stream", "events",
        "--batch", str(BATCH), "--strict", str(cluster.data_file),
    )  # fmt: skip
    assert strict == 1, "--strict: a malformed line is an error"
    assert summary_numbers(out)["replayed"] == 3, "the valid lines are still taken (replays)"
    time.sleep(1.0)  # anything re-forwarded would reach the sink by now
    assert len(cluster.sink.records) == len(expected_values)
    log = StreamLog.open(cluster.directory / "log" / "events", "events", read_only=True)
    try:
        assert len(log.read(0, 10_000)) == RECORDS, "the re-run appended nothing"
    finally:
        log.close()


def test_inject_of_only_malformed_lines_exits_1(
    cluster: Cluster, capsys: pytest.CaptureFixture[str]
) -> None:
    args = build_parser().parse_args(
        ["inject", "--injector", cluster.injector_address, "--stream", "events", "-"]
    )
    stdin = io.BytesIO(b'{"key": "a", "value": "b", "ts": "soon"}\n\n[1, 2]\n\xff\xfe\n')
    assert inject.run(args, stdin=stdin) == 1
    out = capsys.readouterr().out
    assert summary_numbers(out)["accepted"] == 0
    assert "line 1: 'ts' must be integer milliseconds" in out
    assert "line 3: expected a JSON object" in out
    assert "line 4: not UTF-8" in out
    assert "inject stdin -> stream events" in out


def test_inject_rejects_a_stream_that_is_not_a_source(
    cluster: Cluster, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = cli(
        capsys, "inject", "--deployment", str(cluster.deployment), "--stream", "ok",
        str(cluster.data_file),
    )  # fmt: skip
    assert code == 2
    assert "NOT_FOUND" in err and "unknown stream 'ok'" in err and "[events]" in err
    code, _, err = cli(
        capsys, "inject", "--injector", cluster.injector_address, "--stream", "nope",
        str(cluster.data_file),
    )  # fmt: skip
    assert code == 2
    assert "refused Ingest.Ingest" in err and "NOT_FOUND" in err and "unknown stream" in err


def test_progress_line_only_on_a_terminal() -> None:
    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    terminal = Terminal()
    progress = progress_line.Progress(terminal)
    totals = inject.Totals()
    totals.add(1000, replayed=False)
    progress.update(totals, force=True)
    progress.clear()
    text = terminal.getvalue()
    assert text.startswith("\rsent 1,000 records in 1 batches (") and "records/s)" in text
    assert text.endswith("\r")
    plain = io.StringIO()
    progress_line.Progress(plain).update(totals, force=True)
    assert plain.getvalue() == ""
    sized = Terminal()
    progress_line.Progress(sized, total_bytes=4000).update(totals, 1000, force=True)
    bar = "[" + "#" * 6 + "." * 18 + "]  25%  sent 1,000 records"
    assert sized.getvalue().startswith("\r" + bar), sized.getvalue()


def test_the_bar_measures_the_input_read(tmp_path: Path) -> None:
    path = tmp_path / "in.jsonl"
    path.write_bytes(b"a\nbb\n")
    with open(path, "rb") as handle:
        assert progress_line.input_size(handle) == 5
        lines = progress_line.CountedLines(handle)
        assert list(lines) == [b"a\n", b"bb\n"] and lines.bytes_read == 5
    assert progress_line.input_size(io.BytesIO(b"x")) is None  # no file behind it: no bar


def test_batches_and_idempotency_keys_derive_from_the_input() -> None:
    lines = [line.encode() + b"\n" for line in input_lines()]
    malformed: list[inject.Malformed] = []
    batches = list(inject.read_batches(lines, BATCH, malformed))
    assert [len(b.records) for b in batches] == [16, 16, 8]
    assert [b.first_line for b in batches] == [1, 18, 35]
    assert [m.line for m in malformed] == sorted(MALFORMED_LINES)
    again = list(inject.read_batches(lines, BATCH, []))
    keys = [b.idempotency_key("events.jsonl") for b in batches]
    assert keys == [b.idempotency_key("events.jsonl") for b in again]
    assert len(set(keys)) == 3 and all(k.startswith("events.jsonl:") for k in keys)
    assert keys[1].endswith(":18")


def test_watermarks_one_shot_lists_every_computation(
    cluster: Cluster, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = cli(capsys, "watermarks", "--deployment", str(cluster.deployment))
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0].split() == [
        "computation", "low", "watermark", "(UTC)", "ms", "lag", "held", "back", "by"
    ]  # fmt: skip
    names = [line.split()[0] for line in lines[1:]]
    assert names == ["source:events", "count"]
    source = lines[1].split()
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", source[1]), out
    assert int(source[2]) >= BASE_MS and source[-1] == "s"


def test_watermarks_watch_prints_until_ctrl_c(cluster: Cluster) -> None:
    script = (
        "import argparse, sys\n"
        "from millrace.commands import watermarks\n"
        "parser = argparse.ArgumentParser()\n"
        "watermarks.register(parser.add_subparsers())\n"
        "args = parser.parse_args(sys.argv[1:])\n"
        "sys.exit(args.handler(args))\n"
    )
    process = subprocess.Popen(
        [sys.executable, "-c", script, "watermarks", "--deployment", str(cluster.deployment),
         "--watch"],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert process.stdout is not None
        seen = [process.stdout.readline() for _ in range(3)]
        assert seen[0].startswith("computation") and seen[1].startswith("source:events")
        time.sleep(0.5)
        process.send_signal(signal.SIGINT)
        _, err = process.communicate(timeout=15)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == 0, err
    assert "watching for changes" in err and "Traceback" not in err


def test_status_shows_the_node_and_its_leases(
    cluster: Cluster, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = cli(capsys, "status", "--deployment", str(cluster.deployment))
    assert code == 0, err
    assert err == ""
    injector_line, _, *rest = out.splitlines()
    assert injector_line.split()[:3] == ["injector", cluster.injector_address, "healthy"]
    assert "assignment version" in injector_line
    header = rest.index("leases (from the injector)")
    layout_at = rest.index("layout  (rebalancer off)")
    nodes, leases = rest[: header - 1], rest[header + 1 : layout_at - 1]
    layout = rest[layout_at + 1 :]
    assert layout[0].split() == ["interval", "node", "rec/s", "cpu", "note"]
    assert [row.split()[:2] for row in layout[1:]] == [["count/0", "p"], ["count/1", "p"]]
    assert nodes[0].split()[:4] == ["node", "address", "state", "computation"]
    assert nodes[1].split()[:5] == ["p", cluster.node_address, "healthy", "count", "0/2"]
    assert nodes[2].split()[:2] == ["count", "1/2"]
    assert leases[0].split() == ["computation", "interval", "epoch", "node", "address", "note"]
    for row, interval in zip(leases[1:], ("0/2", "1/2"), strict=True):
        cells = row.split()
        assert cells[:2] == ["count", interval] and cells[3:] == ["p", cluster.node_address]
        assert int(cells[2]) >= 1


def test_status_and_watermarks_print_json(
    cluster: Cluster, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = cli(capsys, "status", "--deployment", str(cluster.deployment), "--json")
    assert code == 0, err
    status = json.loads(out)
    assert status["injector"]["state"] == "healthy"
    assert {lease["node_id"] for lease in status["injector"]["leases"]} == {"p"}
    [node] = status["nodes"]
    assert (node["node"], node["state"], node["computation"]) == ("p", "healthy", "count")
    assert sorted(i["interval"]["index"] for i in node["intervals"]) == [0, 1]
    code, out, err = cli(capsys, "watermarks", "--deployment", str(cluster.deployment), "--json")
    assert code == 0, err
    marks = json.loads(out)["watermarks"]
    assert list(marks) == ["source:events", "count"]
    assert marks["source:events"]["low_watermark_ms"] >= BASE_MS
    assert marks["source:events"]["end_of_time"] is False
    assert marks["count"]["held_by"] in ("source:events", "its own pending work")


def test_a_closed_pipe_ends_a_command_quietly(cluster: Cluster) -> None:
    command = (
        f"{sys.executable} -m millrace status --config {cluster.deployment} | head -c 10; "
        "exit ${PIPESTATUS[0]}"
    )
    done = subprocess.run(["bash", "-c", command], capture_output=True, text=True, cwd=ROOT,
                          check=False, timeout=60)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr and "BrokenPipe" not in done.stderr, done.stderr


def test_state_get_reads_the_poison_counter(
    cluster: Cluster, capsys: pytest.CaptureFixture[str]
) -> None:
    expected = sum(1 for i in range(RECORDS) if i % 4 == 1 and i != POISON_AT)
    deployment = str(cluster.deployment)

    def counter() -> str:
        _, out, _ = cli(capsys, "state", "get", "--deployment", deployment,
                        "--computation", "count", "--key", "k1")  # fmt: skip
        return out

    wait_until(lambda: f"n = {expected}" in counter(), 30, "k1's counter")
    code, out, _ = cli(
        capsys, "state", "get", "--deployment", deployment, "--computation", "count",
        "--key", "k1", "--tag", "n",
    )  # fmt: skip
    assert code == 0
    assert out.splitlines()[0].startswith('count key "k1" (interval ')
    assert out.splitlines()[1:] == [f"n = {expected}"]
    code, out, _ = cli(capsys, "state", "get", "--deployment", deployment,
                       "--computation", "count", "--key", "k1", "--tag", "nope")  # fmt: skip
    assert code == 1 and "no tag 'nope' (tags: n)" in out
    code, out, _ = cli(capsys, "state", "get", "--deployment", deployment,
                       "--computation", "count", "--key", "nobody")  # fmt: skip
    assert code == 1 and out.rstrip().endswith("no state")
    code, _, err = cli(capsys, "state", "get", "--deployment", deployment,
                       "--computation", "nope", "--key", "k1")  # fmt: skip
    assert code == 2 and "no computation 'nope'" in err and "computations: count" in err


def test_format_value() -> None:
    assert state.format_value(b"3") == "3"
    assert state.format_value(b'{"a": [1]}') == '{\n  "a": [\n    1\n  ]\n}'
    assert state.format_value(b"plain text") == "plain text"
    assert state.format_value(b"\xff\x00") == "base64:/wA="


def test_deadletters_lists_the_poison_record(
    cluster: Cluster, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ("deadletters", "--deployment", str(cluster.deployment), "--computation", "count")
    outputs: list[str] = []

    def listed() -> bool:
        code, out, err = cli(capsys, *args)
        assert code == 0, err
        outputs.append(out)
        return "no dead letters" not in out

    wait_until(listed, 30, "a dead letter")
    lines = outputs[-1].splitlines()
    assert lines[0].split() == [
        "computation", "record", "id", "key", "value", "attempts", "failed", "at", "error",
    ]  # fmt: skip
    cells = lines[1].split()
    assert cells[0] == "count"
    assert re.fullmatch(r"[0-9a-f]{32}", cells[1])
    assert cells[2:5] == ['"k1"', '"poison"', "2"]
    assert "ValueError: cannot digest b'poison'" in lines[1]
    assert lines[2:] == ["1 dead letter"]
    code, out, _ = cli(capsys, "deadletters", "--deployment", str(cluster.deployment))
    assert code == 0 and out.splitlines()[1:] == lines[1:]
