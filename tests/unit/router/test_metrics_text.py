"""Without Docker: the router's check of every engine's /metrics text (metrics_text.lua, rendered as
the router gets it, run by the real Lua 5.3 that Debian's HAProxy 2.6 links, and 5.4, the official
haproxy image's, through lupa). One engine's bad line must never reach the merged page: Prometheus
and promtool refuse a whole page for one line, so every engine's numbers would be lost with it.

Each bad line of the corpus is left out, counted with its reason, and leaves no trace; every line a
real engine writes is kept; the merged page is always one that Prometheus' text parsers read (checked
here by the grammar of Prometheus' scraper, promlex.l, and by Debian's promtool where installed),
whatever lines engines send (hypothesis)."""

from __future__ import annotations

import importlib
import importlib.util
import math
import re
import shutil
import subprocess
from dataclasses import dataclass

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from aigo_apply.desired.types import Route, RouterSettings
from aigo_apply.router import haproxy_metrics
from aigo_apply.router.haproxy import render_files

lupa = pytest.importorskip("lupa")  # a test dependency (pyproject's [test]); the wheel never needs it
# Lua 5.3: Debian's HAProxy 2.6 (the test router image); 5.4: the official haproxy image's
RUNTIMES = [name for name in ("lua53", "lua54") if importlib.util.find_spec(f"lupa.{name}") is not None]

# What vLLM v0.31.0's prometheus_client writes (families, HELP with escapes, buckets, +Inf, NaN), a
# summary, a counter with _created as its own gauge (prometheus_client's 0.0.4 form), a timestamp.
GOOD = r"""# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="m"} 0.0
# HELP vllm:generation_tokens_total Number of generation tokens processed.
# TYPE vllm:generation_tokens_total counter
vllm:generation_tokens_total{engine="0",model_name="m"} 1234.0
# HELP vllm:generation_tokens_created Number of generation tokens processed.
# TYPE vllm:generation_tokens_created gauge
vllm:generation_tokens_created{engine="0",model_name="m"} 1.7e+09
# HELP vllm:e2e_request_latency_seconds Histogram of e2e request latency in seconds.
# TYPE vllm:e2e_request_latency_seconds histogram
vllm:e2e_request_latency_seconds_bucket{engine="0",le="0.3",model_name="m"} 1.0
vllm:e2e_request_latency_seconds_bucket{engine="0",le="+Inf",model_name="m"} 2.0
vllm:e2e_request_latency_seconds_count{engine="0",model_name="m"} 2.0
vllm:e2e_request_latency_seconds_sum{engine="0",model_name="m"} 0.5
# HELP vllm:lora_requests_info Running stats on lora requests.
# TYPE vllm:lora_requests_info gauge
vllm:lora_requests_info{max_lora="2",running_lora_adapters="a,b",waiting_lora_adapters=""} 1.7e+09
# HELP rpc_seconds A summary \\ with a backslash\nand a line.
# TYPE rpc_seconds summary
rpc_seconds{quantile="0.5"} NaN
rpc_seconds{quantile="0.99"} -Inf
rpc_seconds_sum 0
rpc_seconds_count 0
plain_untyped{path="/a \"b\" \\c\nd",tab="x	y"} +Inf 1700000000000
spaced_out{a = "1" , b="2",}	7
big 1.7976931348623157e+308 9223372036854775807
tiny 1e-999 0
"""
GOOD_SAMPLES = sum(1 for line in GOOD.splitlines() if line and not line.startswith("#"))

# (a line appended to GOOD, the reason the router gives for leaving it out)
BAD = [
    ("a 1e999", "a value that is not a number in range"),
    ("a -1e999", "a value that is not a number in range"),
    ("a 1" + "0" * 400, "a value that is not a number in range"),
    ("a nan", "a value that is not a number in range"),
    ("a Nan", "a value that is not a number in range"),
    ("a inf", "a value that is not a number in range"),
    ("a Inf", "a value that is not a number in range"),
    ("a +Infinity", "a value that is not a number in range"),
    ("a 0x10", "a value that is not a number in range"),
    ("a 1_000", "a value that is not a number in range"),
    ("a 12abc", "a value that is not a number in range"),
    ("a 1 9223372036854775808", "a timestamp that is not an int64 of digits"),
    ("a 1 99999999999999999999999", "a timestamp that is not an int64 of digits"),
    ("a 1 -5", "a timestamp that is not an int64 of digits"),
    ("a 1 +5", "a timestamp that is not an int64 of digits"),
    ("a 1 1.5", "a timestamp that is not an int64 of digits"),
    ("a 1 2 3", "more than a value and a timestamp"),
    ('a{b="c"}', "no value"),
    ("a", "no value"),
    ("1a 1", "not a sample"),
    ("a-b 1", "a bad metric name"),
    ("a.b 1", "a bad metric name"),
    ("é 1", "not a sample"),
    ('a{1b="c"} 1', "a bad label name"),
    ('a{b-c="d"} 1', "a bad label name"),
    ('a{b:c="d"} 1', "a bad label name"),
    ('a{b="c",b="d"} 1', "a repeated or reserved label name"),
    ('a{__name__="x"} 1', "a repeated or reserved label name"),
    (r'a{b="c\q"} 1', "an escape Prometheus does not have"),
    (r'a{b="c\t"} 1', "an escape Prometheus does not have"),
    ('a{b="c} 1', "a label value not closed"),
    ('a{b="c" d="e"} 1', "a bad label list"),
    ('a{b="\udcff"} 1', "a label value that is not UTF-8"),  # the byte 0xff (encoded with surrogateescape)
    ('a{b="\udcc3"} 1', "a label value that is not UTF-8"),
    ('a{b="x\ry"} 1', "a control character"),
    ("a 1\r", "a control character"),
    ('a{b="x\x00y"} 1', "a control character"),
    ('a{b="x\x1by"} 1', "a control character"),
    ('a{b="' + "x" * 70000 + '"} 1', f"a line longer than {haproxy_metrics.MAX_LINE} bytes"),
    ("aigo_engine_up 1", "a name the router keeps"),
    ('haproxy_process_nbthread{x="y"} 99', "a name the router keeps"),
    ("# TYPE aigo_x gauge", "a name the router keeps"),
    ("# TYPE a gauge extra", "an unknown type"),
    ("# TYPE a Gauge", "an unknown type"),
    ("# TYPE vllm:num_requests_running counter", "a second TYPE line"),
    ("# HELP vllm:num_requests_running again", "a second HELP line"),
    ("# HELP a \udcff", "a HELP text that is not UTF-8"),
    ("# TYPE a-b gauge", "a bad metric name"),
    ('vllm:num_requests_running{engine="0",model_name="m"} 5', "a repeated series"),
    ('vllm:num_requests_running{model_name="m",engine="0"} 5', "a repeated series"),
    ('vllm:num_requests_running{engine="0",model_name="m",extra=""} 5', "a repeated series"),
    ('vllm:e2e_request_latency_seconds_bucket{engine="0",le="0.30",model_name="m"} 1', "a repeated series"),
    ('vllm:e2e_request_latency_seconds_bucket{engine="0",le="x",model_name="m"} 1', "a le label that is not a number"),
    ('vllm:e2e_request_latency_seconds_sum{le="",model_name="n"} 1', "a le label that is not a number"),
    ('rpc_seconds{quantile="half"} 1', "a quantile label that is not a number"),
    ("# TYPE vllm:e2e_request_latency_seconds_count gauge", "a family whose sample names another family holds"),
    ("# HELP vllm:e2e_request_latency_seconds_bucket buckets", "a HELP line for another family's sample name"),
    ("# TYPE rpc counter", None),  # claims rpc_total: free, so kept (no sample follows: nothing written)
    ("# TYPE plain_untyped gauge", "a type that contradicts the page"),
]


@dataclass
class Merged:
    page: str
    dropped: list[int]
    reasons: list[dict[str, int]]
    cut: list[bool]


@pytest.fixture(params=RUNTIMES or [pytest.param(None, marks=pytest.mark.skip("lupa has no Lua runtime"))])
def merge(request):
    """merge(text, ...) -> Merged: the engines' texts merged into one page, as metrics.lua does, by
    the metrics_text.lua the router is given (engine i is model m{i} of engine vllm)."""
    files = render_files(RouterSettings("lab", "127.0.0.1", 8000, False), [Route("m", None, 4096)])
    lua = importlib.import_module(f"lupa.{request.param}").LuaRuntime(encoding=None)
    lua.execute(files[haproxy_metrics.TEXT_FILE].encode())
    text = lua.globals().aigo_metrics_text

    def run(*texts: str | bytes, over=None) -> Merged:
        page, dropped, reasons, cut = text.new_page(), [], [], []
        for i, body in enumerate(texts):
            pairs = ((b"project", b"lab"), (b"model", f"m{i}".encode()), (b"engine", b"vllm"))
            added = lua.table_from([lua.table_from(pair) for pair in pairs])
            body = body if isinstance(body, bytes) else body.encode("utf-8", "surrogateescape")
            n, why, stopped = text.merge(page, body, added, over)
            dropped.append(n)
            reasons.append({k.decode(): v for k, v in why.items()})
            cut.append(stopped)
        lines = lua.table()
        text.write(page, lines)
        return Merged(b"".join(line + b"\n" for line in lines.values()).decode(), dropped, reasons, cut)

    return run


def test_the_router_loads_the_check_before_the_page_that_uses_it():
    files = render_files(RouterSettings("lab", "127.0.0.1", 8000, False), [Route("m", None, 4096)])
    loads = re.findall(r"^    lua-load \S+/([^/\s]+)$", files["haproxy.cfg"], re.M)
    assert haproxy_metrics.TEXT_FILE in files
    assert loads.index(haproxy_metrics.TEXT_FILE) < loads.index(haproxy_metrics.METRICS_FILE)


def test_every_line_a_real_engine_writes_is_kept_and_the_page_reads(merge):
    merged = merge(GOOD)
    assert merged.dropped == [0], merged.reasons
    samples = [line for line in merged.page.splitlines() if not line.startswith("#")]
    assert len(samples) == GOOD_SAMPLES
    assert all(line.startswith(f'{line.split("{")[0]}{{project="lab",model="m0",engine="vllm"') for line in samples)
    assert (
        'vllm:num_requests_running{project="lab",model="m0",engine="vllm",exported_engine="0",model_name="m"} 0.0'
        in samples
    )
    assert (
        'plain_untyped{project="lab",model="m0",engine="vllm",path="/a \\"b\\" \\\\c\\nd",tab="x\ty"} +Inf 1700000000000'
        in samples
    )
    assert 'spaced_out{project="lab",model="m0",engine="vllm",a="1",b="2"} 7' in samples
    assert 'big{project="lab",model="m0",engine="vllm"} 1.7976931348623157e+308 9223372036854775807' in samples
    assert "# HELP rpc_seconds A summary \\\\ with a backslash\\nand a line." in merged.page
    assert_prometheus_reads(merged.page)


@pytest.mark.parametrize(("line", "why"), BAD, ids=[f"{i}:{line[:40]!r}" for i, (line, _) in enumerate(BAD)])
def test_a_bad_line_is_left_out_counted_and_leaves_no_trace(merge, line, why):
    clean = merge(GOOD).page
    merged = merge(GOOD + line + "\n")
    assert merged.reasons == [{why: 1} if why else {}]
    assert merged.dropped == [1 if why else 0]
    assert merged.page == clean
    assert_prometheus_reads(merged.page)


def test_a_family_left_out_takes_its_samples_with_it_and_the_engine_goes_on(merge):
    text = 'a 1\n# TYPE a gauge\na{x="1"} 2\nb 3\n'  # a TYPE after its samples: Prometheus refuses the page
    merged = merge(text)
    assert merged.reasons == [{"a type that contradicts the page": 1, "a sample of a family left out": 1}]
    assert 'a{project="lab",model="m0",engine="vllm"} 1' in merged.page
    assert 'b{project="lab",model="m0",engine="vllm"} 3' in merged.page and "# TYPE a" not in merged.page
    assert_prometheus_reads(merged.page)


def test_engines_share_one_help_and_type_per_family_and_the_first_type_stands(merge):
    other = "# HELP vllm:num_requests_running Another text.\n# TYPE vllm:num_requests_running counter\n"
    other += 'vllm:num_requests_running{engine="0"} 1\nvllm:generation_tokens_total 5\n'
    merged = merge(GOOD, GOOD, other)
    assert merged.dropped == [0, 0, 2]
    assert merged.reasons[2] == {"a type that contradicts the page": 1, "a sample of a family left out": 1}
    for head in ("# HELP vllm:num_requests_running ", "# TYPE vllm:num_requests_running ", "# TYPE rpc_seconds "):
        assert merged.page.count(head) == 1, head
    assert 'vllm:generation_tokens_total{project="lab",model="m2",engine="vllm"} 5' in merged.page
    assert merged.page.count("vllm:num_requests_running{") == 2  # m0's and m1's: the same series but for model
    assert_prometheus_reads(merged.page)


def test_a_family_whose_samples_another_family_holds_is_refused_either_way_round(merge):
    """expfmt groups h_bucket, h_sum and h_count under histogram h: a gauge h_count beside it is a
    second TYPE for h, and Prometheus refuses the page."""
    histogram = '# TYPE h histogram\nh_bucket{le="+Inf"} 1\nh_count 1\nh_sum 1\n'
    gauge = "# TYPE h_count gauge\nh_count 5\n"
    first = merge(histogram, gauge)
    assert first.reasons[1] == {
        "a family whose sample names another family holds": 1,
        "a sample of a family left out": 1,
    }
    second = merge(gauge, histogram)
    assert second.reasons[1] == {
        "a family whose sample names another family holds": 1,
        "a sample of a family left out": 3,
    }
    assert_prometheus_reads(first.page)
    assert_prometheus_reads(second.page)


def test_the_engines_labels_are_kept_beside_the_routers_the_same_way_whatever_their_order(merge):
    one = merge('a{model="x",exported_model="y",engine="0"} 1\n').page
    other = merge('a{engine="0",exported_model="y",model="x"} 1\n').page
    assert one == other
    assert (
        'a{project="lab",model="m0",engine="vllm",exported_engine="0",exported_model="y",exported_exported_model="x"} 1'
        in one
    )
    assert_prometheus_reads(one)


def test_a_last_line_without_its_line_feed_may_be_cut_and_is_left_out(merge):
    merged = merge("a 1\nb 12")  # "b 123" cut short would read as 12
    assert merged.reasons == [{"a last line without its line feed": 1}]
    assert "b{" not in merged.page and 'a{project="lab",model="m0",engine="vllm"} 1' in merged.page


def test_when_the_page_has_no_time_left_the_rest_of_an_engine_is_left_out_and_counted(merge):
    asked = []

    def over():
        asked.append(1)
        return len(asked) > 1  # time runs out at the second look

    text = "".join(f"a{i} {i}\n" for i in range(1000))
    merged = merge(text, over=over)
    assert merged.cut == [True]
    kept = [line for line in merged.page.splitlines() if not line.startswith("#")]
    assert len(kept) + merged.dropped[0] == 1000
    assert merged.reasons == [{"no time left for the page": merged.dropped[0]}] and 0 < len(kept) < 1000
    assert merge(text).cut == [False]


def test_a_long_hostile_line_costs_linear_time(merge):
    """Lua patterns backtrack: a pattern that does over a 64 KiB line takes seconds, and HAProxy's
    watchdog kills the whole router for a Lua call that long. Each of these takes milliseconds."""
    import time

    n = haproxy_metrics.MAX_LINE - 16
    for line in (
        "a " + "1" * n + "x",
        "a" + "\t" * n,
        "# HELP a " + " " * n + "x",
        "# HELP a" + " " * n,
        "a{" + "}" * n,
        'a{b="' + "\\\\" * (n // 2) + '"} 1',
        "a 1 " + "2" * n,
        "a " + "1 " * (n // 2),
    ):
        started = time.process_time()
        merge((line + "\n") * 4)
        assert time.process_time() - started < 0.5, line[:20]


FRAGMENTS = [
    *("a", "vllm:x", "h_bucket", "h_sum", "h", "aigo_x", "le", "quantile", "model", "x", "_total", "é"),
    *("{", "}", "=", ",", '"', "\\", "\\n", "\\q", " ", "\t", "\udcff", "\r", "\x00", "# HELP ", "# TYPE "),
    *("1", "-1", "1e999", "NaN", "nan", "+Inf", "9223372036854775808", "0.5", "gauge", "histogram", "summary"),
]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    st.lists(
        st.lists(st.lists(st.sampled_from(FRAGMENTS), max_size=12).map("".join), max_size=25), min_size=1, max_size=3
    )
)
def test_whatever_engines_send_the_page_is_one_prometheus_reads(merge, engines):
    texts = [GOOD + "".join(f"{line}\n" for line in lines) for lines in engines]
    merged = merge(*texts)
    assert_prometheus_reads(merged.page)
    assert (
        'vllm:generation_tokens_total{project="lab",model="m0",engine="vllm",exported_engine="0",model_name="m"} 1234.0'
        in merged.page
    )


# --- what Prometheus' text parsers read -------------------------------------------------------------
# promlex.l (the scraper's lexer) and expfmt (promtool's parser), as rules: a sample is NAME, optional
# {LABEL="VALUE",...} with only \\, \" and \n escaped and UTF-8 values, a value Go's ParseFloat reads
# (no p, P or _) and finite unless NaN or ±Inf, and a timestamp of digits within int64; one HELP and one
# TYPE per family, the TYPE before its samples; a histogram's le and a summary's quantile numbers; no
# series twice.
NAME = r"[a-zA-Z_:][a-zA-Z0-9_:]*"
LABEL = r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:\\[\\"n]|[^\\"\n])*)"'
SAMPLE = re.compile(rf"({NAME})(?:\{{((?:{LABEL},?)*)\}})?[ \t]+(\S+)(?:[ \t]+(\d+))?")
SUFFIXES = {"histogram": ("_bucket", "_sum", "_count"), "summary": ("_sum", "_count")}


def family_of(name: str, types: dict[str, str]) -> str:
    return next((f for f, t in types.items() if name in (f, *(f + s for s in SUFFIXES.get(t, ())))), name)


def assert_prometheus_reads(page: str) -> None:
    assert page == "" or page.endswith("\n")
    helps, types, seen, families = set(), {}, set(), {}
    for line in page.splitlines():
        assert not re.search(r"[\x00-\x08\x0a-\x1f\x7f]", line), repr(line)
        if line.startswith(("# HELP ", "# TYPE ")):
            kind, name, rest = line[2:6], *line[7:].split(" ", 1)
            assert re.fullmatch(NAME, name), line
            holder = family_of(name, types)  # expfmt reads h_count's TYPE as h's when h is a histogram
            assert holder == name, f"{line}: a name of family {holder}"
            bag = helps if kind == "HELP" else types
            assert name not in bag and name not in families, f"a second {kind} or one after samples: {line}"
            if kind == "TYPE":
                assert rest in ("counter", "gauge", "histogram", "summary", "untyped"), line
                types[name] = rest
            else:
                helps.add(name)
                assert not re.search(r"\\[^\\n]", rest.replace("\\\\", "")), line
            continue
        match = SAMPLE.fullmatch(line)
        assert match, repr(line)
        name, value, stamp = match[1], match[5], match[6]
        labels = re.findall(LABEL, match[2] or "")
        assert len({k for k, _ in labels}) == len(labels), line
        assert not any(k.startswith("__") for k, _ in labels), line
        assert value in ("NaN", "+Inf", "-Inf") or (not re.search("[pP_xX]", value) and math.isfinite(float(value)))
        assert stamp is None or int(stamp) < 2**63, line
        family = family_of(name, types)
        families[family] = True
        numeric = {"histogram": "le", "summary": "quantile"}.get(types.get(family, ""))
        for k, v in labels:
            if k == numeric:
                assert v in ("+Inf", "-Inf", "NaN") or math.isfinite(float(v)), line
        key = (name, frozenset((k, v) for k, v in labels if v))
        assert key not in seen, f"a repeated series: {line}"
        seen.add(key)
    if shutil.which("promtool"):  # Debian's prometheus (scripts/setup installs it)
        checked = subprocess.run(["promtool", "check", "metrics"], input=page.encode(), capture_output=True, timeout=30)
        assert checked.returncode in (0, 3), checked.stdout.decode() + checked.stderr.decode()  # 3: lint remarks only
