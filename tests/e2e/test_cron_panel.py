"""The cron panel in a real browser: a job created in the toolbox's Cron jobs tab, run now by Talaria's
scheduler (the agent's own tick), its run shown with its output and session, paused and deleted; the panel
says which process fires the jobs. The real server and agent; the fake LLM answers the job's turn."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from talaria_testing.fake_llm import FakeLLM, Reply, agent_server

from .helpers import goto_app, open_page, screenshots

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def fake():
    with FakeLLM() as server:
        yield server


@pytest.fixture(scope="module")
def cron_server(tmp_path_factory, fake):
    server = agent_server(
        tmp_path_factory.mktemp("cron"),
        fake.base_url,
        env={"TALARIA_CRON_SCHEDULER": "1", "TALARIA_CRON_TICK_SECONDS": "1"},
    )
    with server:
        yield server


def test_a_job_is_created_run_now_shown_with_its_output_then_paused_and_deleted(browser, cron_server, fake):
    fake.script(Reply(text="Three herons on the river today."))
    with open_page(browser, cron_server.base_url) as page:
        page.guard.allowed_statuses.add(400)  # the refused schedule
        goto_app(page)
        page.locator("#open-toolbox").click()
        dialog = page.locator("dialog.toolbox")
        dialog.locator(".toolbox-tab", has_text="Cron jobs").click()
        expect(dialog.locator(".cron-fired-by")).to_contain_text("Talaria fires the jobs")
        expect(dialog.locator(".cron-jobs")).to_contain_text("No cron jobs yet.")

        form = dialog.locator(".cron-create form")
        form.locator("input[name=schedule]").fill("whenever")
        form.locator("textarea[name=prompt]").fill("Count the herons.")
        form.get_by_role("button", name="Create job").click()
        expect(form.locator(".form-error")).to_contain_text("schedule")
        screenshots(page, "cron-bad-schedule")

        form.locator("input[name=name]").fill("Heron count")
        form.locator("input[name=schedule]").fill("every 1d")
        form.get_by_role("button", name="Create job").click()
        job = dialog.locator(".cron-job", has_text="Heron count")
        expect(job).to_contain_text("every 1440m")
        expect(job.locator(".toolbox-badge")).to_have_text("scheduled")

        job.get_by_role("button", name="Run now").click()
        job = dialog.locator(".cron-job", has_text="Heron count")
        expect(job.locator(".cron-facts")).to_contain_text("last run completed", timeout=45000)
        screenshots(page, "cron-jobs")

        job.get_by_role("button", name="Runs").click()
        run = dialog.locator(".cron-run").first
        expect(run.locator(".cron-output").first).to_have_text("Three herons on the river today.")
        expect(run.locator(".cron-whole .cron-output")).to_contain_text("Count the herons.")
        expect(run).to_contain_text("fired by Talaria")
        expect(run.locator(".cron-status")).to_have_text("completed")
        expect(run.locator("a.cron-session")).to_have_attribute("href", f"#/s/{_session_of(cron_server)}")
        screenshots(page, "cron-runs")

        dialog.get_by_role("button", name="← All jobs").click()
        job = dialog.locator(".cron-job", has_text="Heron count")
        job.get_by_role("button", name="Pause").click()
        expect(job.locator(".toolbox-badge")).to_have_text("paused")
        page.once("dialog", lambda confirm: confirm.accept())
        dialog.locator(".cron-job", has_text="Heron count").get_by_role("button", name="Delete").click()
        expect(dialog.locator(".cron-jobs")).to_contain_text("No cron jobs yet.")
    assert cron_server.get_json("/api/cron/jobs")["jobs"] == []


def _session_of(server) -> str:
    job = server.get_json("/api/cron/jobs")["jobs"][0]
    return server.get_json(f"/api/cron/runs?job_id={job['id']}")["runs"][0]["session_id"]
