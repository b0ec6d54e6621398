"""Start the app: `python -m ui [--host 127.0.0.1] [--port 7860] [--auth user:pass]`.

It binds 127.0.0.1 unless told otherwise; use --host 0.0.0.0 together with --auth to share it.
The password can also come from NARRATIVE_EVAL_UI_AUTH (user:pass), which keeps it out of the process list.
SIGTERM and Ctrl-C stop it cleanly: every engine process its models started (vLLM's engine core) stops with it;
sweeps it launched keep running.
"""

from __future__ import annotations

import argparse
import os
import signal
from pathlib import Path

from narrative_eval.backends import stop_engines
from narrative_eval.errors import UserError, add_debug_flag, cli_main
from ui.common import REPO, AppSettings

AUTH_ENV = "NARRATIVE_EVAL_UI_AUTH"
LAUNCH_ATTEMPTS = 3
QUEUE_POLL_S = 0.02
"""How often Gradio's event queue looks for work while it has none. Its own default on Linux, 1 ms (and 10 ms for
progress updates), keeps an idle app at about 3 % of a core (measured: 0.96 CPU s in 30 idle seconds, 0.20 at 20 ms);
20 ms is the most a click waits before its event starts."""


def _slow_idle_polling(demo) -> None:
    """Make the queue's idle polling QUEUE_POLL_S (Gradio has no setting for it; a Gradio without these attributes is
    left as it is)."""
    queue = getattr(demo, "_queue", None)
    for name in ("sleep_when_free", "progress_update_sleep_when_free"):
        if isinstance(getattr(queue, name, None), float):
            setattr(queue, name, max(getattr(queue, name), QUEUE_POLL_S))


def _forgive_a_second_session_close(demo) -> None:
    """Let Gradio's queue forget a browser session twice without raising.

    A page with two event streams open (two events in flight) that closes has both streams cancelled at once; each
    one's clean-up deletes the session's message queue, and the second delete raises KeyError (Gradio 6.31). That
    prints a traceback on the app's console for nothing the user did wrong, and cuts the second stream's clean-up
    short, leaving its heartbeat task running. A missing session is already the state the delete wants, so the app's
    table of sessions treats deleting one as done. A Gradio without this table is left as it is."""
    queue = getattr(demo, "_queue", None)
    sessions = getattr(queue, "pending_messages_per_session", None)
    if not isinstance(sessions, dict) or isinstance(sessions, _SessionsClosedOnce):
        return

    class Sessions(_SessionsClosedOnce, type(sessions)):
        pass

    sessions.__class__ = Sessions


class _SessionsClosedOnce(dict):
    def __delitem__(self, session_hash) -> None:
        if session_hash in self:
            super().__delitem__(session_hash)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m ui", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1: this machine only)")
    parser.add_argument("--port", type=int, default=7860, help="port (default 7860)")
    parser.add_argument("--auth", metavar="USER:PASS", help=f"require a login (or set {AUTH_ENV})")
    parser.add_argument("--reports-dir", default=str(REPO / "reports"), help="parent of the sweeps' report folders")
    parser.add_argument("--jobs-dir", default=str(REPO / ".cache" / "ui_jobs"), help="where launched jobs keep their files")
    parser.add_argument("--annotations", default=os.environ.get("NARRATIVE_EVAL_ANNOTATIONS") or str(REPO / ".cache" / "annotations.sqlite"),
                        help="SQLite file for human ratings")
    parser.add_argument("--max-jobs", type=int, default=1, help="sweeps allowed to run at once (default 1)")
    parser.add_argument("--mlflow-ui", default=os.environ.get("MLFLOW_UI_URL", "http://127.0.0.1:5000"),
                        help="where `mlflow ui` runs, for links to runs")
    add_debug_flag(parser)
    return parser.parse_args(argv)


def _auth(text: str | None) -> tuple[str, str] | None:
    text = text or os.environ.get(AUTH_ENV)
    if not text:
        return None
    user, sep, password = text.partition(":")
    if not sep or not user or not password:
        raise UserError(f"--auth (or {AUTH_ENV}) expects USER:PASS")
    return user, password


def _warm_up_tracking() -> None:
    """Open the tracking store once before serving: its first use (schema checks) takes seconds, not the first page."""
    from narrative_eval import tracking

    try:
        tracking.client().search_experiments(max_results=1)
    except Exception as error:  # the app still starts; tabs show what they can
        print(f"warning: the tracking store at {tracking.tracking_uri()} did not answer: {type(error).__name__}")


def _check_port(host: str, port: int) -> None:
    """A port another program holds is a user error, said before the app spends seconds building its tabs."""
    import socket

    if not 0 < port < 65536:
        raise UserError(f"--port must be 1-65535, got {port}")
    with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as error:
            raise UserError(f"cannot serve on {host}:{port}: {error.strerror or error}; pass another --port") from None


def _interrupt(signum: int, _frame) -> None:
    """SIGTERM as Ctrl-C: the server closes, then the engines stop (the default action would end the app at once
    and leave its engine processes running)."""
    raise KeyboardInterrupt(signal.Signals(signum).name)


def main(argv: list[str] | None = None) -> int:
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        return serve(argv)
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # a second SIGTERM must not cut the engines' stop short
        stop_engines()


def serve(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    auth = _auth(args.auth)
    _check_port(args.host, args.port)
    # Relative paths in configs and logged runs (data/..., reports/...) are relative to the repo root.
    os.chdir(REPO)
    settings = AppSettings(reports_dir=Path(args.reports_dir).resolve(), jobs_dir=Path(args.jobs_dir).resolve(),
                           annotations_path=Path(args.annotations).resolve(), max_jobs=args.max_jobs,
                           mlflow_ui_url=args.mlflow_ui)
    settings.reports_dir.mkdir(parents=True, exist_ok=True)
    from ui.app import allowed_paths, blocked_paths, build_app, css

    demo = build_app(settings)
    _warm_up_tracking()
    if args.host not in ("127.0.0.1", "localhost", "::1") and auth is None:
        print(f"warning: serving on {args.host} without --auth; anyone who can reach this port can use the app")
    demo.queue(default_concurrency_limit=4)
    _slow_idle_polling(demo)
    _forgive_a_second_session_close(demo)
    for attempt in range(LAUNCH_ATTEMPTS):
        try:
            demo.launch(
                server_name=args.host, server_port=args.port, auth=auth, allowed_paths=allowed_paths(settings),
                blocked_paths=blocked_paths(settings), css=css(), share=False, show_error=True, footer_links=[],
            )
            return 0
        except ValueError as error:
            # Gradio probes its own page with a 3 s timeout; on a busy machine the first probe can miss.
            if "localhost is not accessible" not in str(error) or attempt == LAUNCH_ATTEMPTS - 1:
                raise
            demo.close()
            print("the app's self-check timed out; starting again")
    return 1


if __name__ == "__main__":
    raise SystemExit(cli_main(main))
