"""The setup form's connection test: hostile URLs refused, and a bounded request to a real local server."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from api.agent import endpoint_probe
from api.rules.errors import BadRequest
from talaria_testing.server_proc import ServerProc
from talaria_testing.trickle import posting_at_once, trickling_endpoint


@contextmanager
def endpoint(routes: dict) -> Iterator[str]:
    """A real HTTP server on 127.0.0.1; ``routes[path]`` is ``(status, headers, body)`` or a delay in seconds."""

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_GET(self):
            answer = routes.get(self.path, (404, {}, b"{}"))
            if isinstance(answer, float):
                time.sleep(answer)
                answer = (200, {}, b"{}")
            status, headers, body = answer
            self.send_response(status)
            for name, value in headers.items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            try:
                self.wfile.write(body)
            except OSError:
                pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


MODELS = json.dumps({"data": [{"id": "m1"}, {"id": "m2"}, {"id": "m1"}, {"id": 7}]}).encode()


@pytest.mark.parametrize(
    "url",
    [
        "file:///etc/passwd",
        "ftp://127.0.0.1/v1",
        "javascript:alert(1)",
        "http://user:pw@127.0.0.1/v1",
        "http://127.0.0.1:99999/v1",
        "http:///v1",
        "http://127.0.0.1/v1?x=1",
        "http://127.0.0.1/v1#frag",
        "http://127.0.0.1/ v1",
        "http://127.0.0.1/\x00",
        "http://" + "a" * 3000,
        "",
        None,
        42,
        ["http://127.0.0.1"],
    ],
)
def test_hostile_or_malformed_base_urls_are_refused_in_the_persons_words(url):
    """Issue 19.20: the refusal named the request field ("base_url must be…"); it speaks of the URL."""
    with pytest.raises(BadRequest) as refused:
        endpoint_probe.clean_base_url(url)
    assert refused.value.message.startswith("The URL ") and "base_url" not in refused.value.message


def test_a_base_url_loses_its_trailing_slash():
    assert endpoint_probe.clean_base_url(" https://api.example.com/v1/ ") == "https://api.example.com/v1"


@pytest.mark.parametrize("key", ["two words", "tab\tkey", "naïve", 5, "x" * 5000])
def test_keys_must_be_printable_ascii(key):
    with pytest.raises(BadRequest) as refused:
        endpoint_probe.clean_api_key(key)
    assert refused.value.message.startswith("The API key ")


def test_model_ids_keep_string_ids_once_in_order():
    assert endpoint_probe.model_ids(json.loads(MODELS)) == ["m1", "m2"]
    assert endpoint_probe.model_ids({"models": [{"name": "llama3"}]}) == ["llama3"]
    assert endpoint_probe.model_ids({"data": "nope"}) == [] and endpoint_probe.model_ids(None) == []


def test_a_working_endpoint_lists_its_models():
    with endpoint({"/v1/models": (200, {"Content-Type": "application/json"}, MODELS)}) as url:
        result = endpoint_probe.probe(f"{url}/v1", "sk-test-1")
    assert result.ok and result.models == ["m1", "m2"], result


def test_a_redirect_to_another_host_is_not_followed():
    with endpoint({"/v1/models": (302, {"Location": "http://localhost:1/v1/models"}, b"")}) as url:
        result = endpoint_probe.probe(f"{url}/v1")
    assert not result.ok and "another host" in result.message


def test_a_redirect_on_the_same_host_is_followed():
    routes = {
        "/v1/models": (301, {"Location": "/v2/models"}, b""),
        "/v2/models": (200, {}, MODELS),
    }
    with endpoint(routes) as url:
        assert endpoint_probe.probe(f"{url}/v1").models == ["m1", "m2"]


def test_an_endless_redirect_loop_stops():
    with endpoint({"/v1/models": (302, {"Location": "/v1/models"}, b"")}) as url:
        result = endpoint_probe.probe(f"{url}/v1")
    assert not result.ok and "too often" in result.message


def test_a_huge_answer_is_cut_off():
    huge = b"[" + b'"x",' * (endpoint_probe.RESPONSE_CAP // 4 + 10) + b'"x"]'
    with endpoint({"/v1/models": (200, {}, huge)}) as url:
        result = endpoint_probe.probe(f"{url}/v1")
    assert not result.ok and "too large" in result.message


def test_a_slow_endpoint_times_out():
    with endpoint({"/v1/models": 2.0}) as url:
        started = time.monotonic()
        result = endpoint_probe.probe(f"{url}/v1", timeout=0.3)
    assert not result.ok and "No answer" in result.message
    assert time.monotonic() - started < 1.9


@pytest.mark.parametrize(
    ("answer", "words"),
    [
        ((401, {}, b"{}"), "refused the key"),
        ((500, {}, b"{}"), "HTTP 500"),
        ((200, {}, b"<html>"), "not JSON"),
        ((200, {}, b'{"data": []}'), "no models"),
    ],
)
def test_failures_are_explained_without_echoing_the_answer(answer, words):
    with endpoint({"/v1/models": answer}) as url:
        result = endpoint_probe.probe(f"{url}/v1", "sk-secret-99")
    assert not result.ok and words in result.message and "sk-secret-99" not in result.message


def test_nothing_listening_is_a_failed_test_not_an_error():
    with endpoint({}) as url:
        pass
    result = endpoint_probe.probe(f"{url}/v1")
    assert not result.ok and result.message.startswith("Cannot connect")


def test_an_endpoint_that_trickles_its_answer_is_cut_off_at_the_deadline():
    """The timeout bounded each read, not the test: an endpoint sending its head and then a byte every few
    seconds held the connection test for as long as it kept trickling. A real socket server trickling a
    byte every 0.3 s: the test ends at its 1 s deadline (three times that at most on a loaded machine)."""
    results: list[endpoint_probe.ProbeResult] = []
    with trickling_endpoint(interval=0.3) as url:
        worker = threading.Thread(target=lambda: results.append(endpoint_probe.probe(url, timeout=1.0)))
        worker.start()
        worker.join(3.0)
    worker.join(10)  # the endpoint is gone: a probe still reading ends now
    assert results and not results[0].ok and "No answer within 1 seconds" in results[0].message


def test_eight_trickled_connection_tests_end_at_their_deadline_and_health_answers(tmp_path):
    """Through the real server: eight connection tests to a trickling endpoint at once each answer within
    the documented 8 s (plus slack for a loaded machine), and /health answers while they run."""
    with trickling_endpoint(interval=1.0) as url, ServerProc(tmp_path) as srv:
        started = time.monotonic()
        body = {"kind": "custom", "base_url": url}
        with posting_at_once(srv, "/api/onboarding/probe", body) as answers:
            time.sleep(1)
            assert srv.request("GET", "/health", timeout=5)[0] == 200
        elapsed = time.monotonic() - started
    assert [status for status, _ in answers] == [200] * 8, answers
    assert all("No answer within 8 seconds" in data["message"] for _, data in answers)  # type: ignore[index]
    assert elapsed < endpoint_probe.TIMEOUT_S + 12
