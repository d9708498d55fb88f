"""The installable app over HTTP: the worker at /sw.js, the manifest, and the page's policy allowing both."""

from __future__ import annotations

import json

import pytest

from talaria_testing.server_proc import ServerProc


@pytest.fixture(scope="module")
def srv(tmp_path_factory):
    with ServerProc(tmp_path_factory.mktemp("app_shell")) as server:
        yield server


def test_the_worker_is_served_at_the_root_as_javascript_with_a_policy_that_lets_it_fetch_only_here(srv):
    status, headers, body = srv.request("GET", "/sw.js")
    assert status == 200
    assert headers["content-type"] == "text/javascript; charset=utf-8"
    assert (
        headers["content-security-policy"] == "default-src 'none'; connect-src 'self'; frame-ancestors 'none'"
    )
    assert headers["x-content-type-options"] == "nosniff"
    assert headers["cache-control"] == "no-cache"
    head = body.split(b";\n", 1)[0].removeprefix(b"self.TALARIA_SHELL = ")
    shell = json.loads(head)
    assert "/" in shell["urls"] and "/static/js/app.js" in shell["urls"]
    assert "/static/manifest.webmanifest" in shell["urls"]
    assert all(url == "/" or url.startswith("/static/") for url in shell["urls"])
    assert "/static/sw.js" not in shell["urls"]
    again = srv.request("GET", "/sw.js", headers={"If-None-Match": headers["etag"]})
    assert again[0] == 304


def test_the_manifest_names_the_app_its_icons_and_the_whole_origin_as_its_scope(srv):
    status, headers, body = srv.request("GET", "/static/manifest.webmanifest")
    assert status == 200 and headers["content-type"] == "application/manifest+json"
    manifest = json.loads(body)
    assert manifest["scope"] == "/" and manifest["start_url"] == "/"
    purposes = {icon["purpose"] for icon in manifest["icons"]}
    assert purposes == {"any", "maskable"}
    for icon in manifest["icons"]:
        status, headers, _ = srv.request("GET", icon["src"])
        assert status == 200 and headers["content-type"] == "image/svg+xml"


def test_the_page_policy_allows_its_own_worker_and_manifest(srv):
    status, headers, _ = srv.request("GET", "/")
    assert status == 200
    csp = headers["content-security-policy"]
    assert "worker-src 'self'" in csp and "manifest-src 'self'" in csp


@pytest.mark.parametrize("path", ["/sw.js/", "/sw.js%00", "/api/sw.js", "/static/../sw.js"])
def test_paths_near_the_worker_get_a_json_404(srv, path):
    status, headers, body = srv.request("GET", path)
    assert status == 404 and headers["content-type"].startswith("application/json")
    assert "error" in json.loads(body)
