"""Imports started over the API (`POST /api/imports`), run in a background thread.

A job imports every file under one path on the server with the existing `Importer`,
and tells how far it got (files done of the total, messages, problems) while it runs;
`GET /api/imports/jobs/{id}` reads that. The path must lie under the import roots
(`opencrab.importers.roots`; each file found is checked again when it is read). The
request only checks the path; looking for the files under it (which may take a while)
is the job's first step, and a path with none fails the job. One job runs at a time per
server. `cancel` stops a job between files: it is `cancelling` while it stores the files
read so far, then `cancelled`. Jobs live in the server process (the last `KEEP` are
remembered); the import itself is stored as any `opencrab import` is.

Example:
    job = jobs.start(db, "codex", "/home/me/.codex/sessions", roots=roots, limits=limits)
    jobs.get(job.id).files_done
    jobs.cancel(job.id)
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path
from uuid import uuid4

from opencrab.errors import ConflictError, NotFoundError, ValidationError
from opencrab.importers.common import ReadLimits
from opencrab.importers.results import FileResult
from opencrab.importers.roots import ImportRoots
from opencrab.importers.store import SOURCES, Importer
from opencrab.store import Database
from opencrab.store.types import utcnow

log = logging.getLogger(__name__)

KEEP = 50
"""Finished jobs remembered per server."""
MAX_PROBLEMS = 100
"""Problems a job keeps to show (all are counted)."""


@dataclass(frozen=True)
class ImportJob:
    """A snapshot of one import job. status: running, cancelling (asked to stop; storing
    what it read), cancelled, done or failed."""

    id: str
    source: str
    path: str
    agent_id: str | None
    status: str
    files_total: int
    files_done: int = 0
    lines: int = 0
    messages: int = 0
    problems: int = 0
    problem_lines: tuple[tuple[str, int, str], ...] = ()  # (file, line, reason)
    session_ids: tuple[str, ...] = ()
    cost_usd: float = 0.0
    error: str | None = None
    started_at: datetime = field(default_factory=utcnow)
    finished_at: datetime | None = None


ACTIVE = ("running", "cancelling")
"""The statuses of a job that has not stopped."""


class ImportJobs:
    """The import jobs of one server process."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._jobs: dict[str, ImportJob] = {}
        self._stops: dict[str, threading.Event] = {}  # a running job's stop request

    def start(
        self,
        db: Database,
        source: str,
        path: str,
        *,
        roots: ImportRoots,
        agent_id: str | None = None,
        limits: ReadLimits | None = None,
    ) -> ImportJob:
        """Check the path (under `roots`) and start finding and importing its files in a
        thread (raises ConflictError while another job runs)."""
        if source not in SOURCES:
            raise ValidationError(f"unknown transcript source {source!r}: use codex or claude")
        where = roots.check(path)
        importer = Importer(db, source, agent_id=agent_id, limits=limits, roots=roots)
        job = ImportJob(str(uuid4()), source, str(where), agent_id, "running", 0)
        with self._lock:
            running = [j.id for j in self._jobs.values() if j.status in ACTIVE]
            if running:
                raise ConflictError(
                    f"import job {running[0]} is still running; start another when it is done"
                )
            self._jobs[job.id] = job
            self._stops[job.id] = threading.Event()
            for old in [j.id for j in self._jobs.values() if j.status not in ACTIVE][:-KEEP]:
                del self._jobs[old]
        worker = threading.Thread(
            target=self._run, args=(job.id, importer, where), name=f"import-{job.id[:8]}"
        )
        worker.daemon = True
        worker.start()
        return job

    def get(self, job_id: str) -> ImportJob:
        """A job as it is now (raises NotFoundError)."""
        with self._lock:
            job = self._jobs.get(job_id)
        if job is None:
            raise NotFoundError(f"no import job {job_id}")
        return job

    def cancel(self, job_id: str) -> ImportJob:
        """Ask a job to stop after the file in hand: it is `cancelling` until the files
        read so far are stored, then `cancelled`. A job already cancelled is returned as
        it is; one that is done or failed is a ConflictError (raises NotFoundError)."""
        with self._lock:
            job = self._jobs.get(job_id)
            if job is None:
                raise NotFoundError(f"no import job {job_id}")
            if job.status == "running":
                self._stops[job_id].set()
                job = self._jobs[job_id] = replace(job, status="cancelling")
            elif job.status not in ("cancelling", "cancelled"):
                raise ConflictError(
                    f"import job {job_id} has ended ({job.status}); nothing to stop"
                )
        return job

    def _run(self, job_id: str, importer: Importer, where: Path) -> None:
        stop = self._stops[job_id]

        def progress(result: FileResult, _size: int) -> None:
            problems = [(p.file, p.line, p.reason) for p in result.problems]
            with self._lock:
                job = self._jobs[job_id]
                job = replace(
                    job,
                    files_done=job.files_done + 1,
                    lines=job.lines + result.lines,
                    messages=job.messages + result.messages,
                    cost_usd=job.cost_usd + result.cost_usd,
                    session_ids=(*job.session_ids, result.session_id),
                )
                self._jobs[job_id] = self._add_problems(job, problems)

        try:
            files, missing = importer.find([where])
            with self._lock:
                job = replace(self._jobs[job_id], files_total=len(files))
                job = self._add_problems(job, [(p.file, p.line, p.reason) for p in missing])
                self._jobs[job_id] = job
            if not files:
                name = importer.source.name
                self._finish(job_id, "failed", f"no {name} transcripts found under {where}")
                return
            summary = importer.run(files, progress=progress, stop=stop.is_set)
        except Exception as exc:  # the job reports it; the server goes on
            log.exception("import job %s failed", job_id)
            self._finish(job_id, "failed", f"{type(exc).__name__}: {exc}")
        else:
            stopped = stop.is_set() and len(summary.files) < len(files)
            self._finish(job_id, "cancelled" if stopped else "done", None)

    def _finish(self, job_id: str, status: str, error: str | None) -> None:
        with self._lock:
            job = self._jobs[job_id]
            self._jobs[job_id] = replace(job, status=status, error=error, finished_at=utcnow())
            self._stops.pop(job_id, None)

    @staticmethod
    def _add_problems(job: ImportJob, problems: list[tuple[str, int, str]]) -> ImportJob:
        if not problems:
            return job
        kept = (*job.problem_lines, *problems)[:MAX_PROBLEMS]
        return replace(job, problems=job.problems + len(problems), problem_lines=kept)
