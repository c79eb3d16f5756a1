"""Tracing off costs nothing, not even an import: ``import trio_actors`` and a system
opened without ``tracing=`` import no OpenTelemetry (nor the tracing modules);
without the OpenTelemetry API installed, ``tracing=True`` says what to install; and
``tracing=True`` uses the global tracer provider. Each in a fresh interpreter (a
subprocess), so that what this test process imported does not count."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.usefixtures("no_context_left_behind")


def run(program: str) -> str:
    """Run ``program`` in a fresh interpreter; return what it printed."""
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(program)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_a_system_without_tracing_imports_no_opentelemetry() -> None:
    printed = run(
        """
        import sys
        import trio
        import trio_actors as ta

        class Echo(ta.Actor):
            def receive(self, message):
                return message

        async def main():
            async with ta.open_actor_system() as system:
                echo = system.spawn(Echo)
                echo.tell("told")
                assert await echo.ask("asked") == "asked"

        trio.run(main)
        loaded = sorted(
            name for name in sys.modules
            if name.split(".")[0] == "opentelemetry" or name.startswith("trio_actors.observe")
        )
        print(loaded)
        """
    )
    assert printed.strip() == "[]"


def test_tracing_without_the_opentelemetry_api_says_what_to_install() -> None:
    printed = run(
        """
        import sys
        sys.modules["opentelemetry"] = None  # (as if it were not installed)
        import trio
        import trio_actors as ta

        async def main():
            try:
                async with ta.open_actor_system(tracing=True):
                    print("opened")
            except ModuleNotFoundError as error:
                print(error.name, "|", error)

        trio.run(main)
        """
    )
    assert printed.strip() == (
        'opentelemetry | tracing needs OpenTelemetry (its API): pip install "trio-actors[otel]"'
    )


def test_tracing_true_traces_with_the_global_tracer_provider() -> None:
    printed = run(
        """
        import trio
        from opentelemetry import trace
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
        import trio_actors as ta

        exporter = InMemorySpanExporter()
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        trace.set_tracer_provider(provider)

        class Echo(ta.Actor):
            def receive(self, message):
                return message

        async def main():
            async with ta.open_actor_system(tracing=True) as system:
                await system.spawn(Echo).ask("x")

        trio.run(main)
        print(sorted(span.name for span in exporter.get_finished_spans()))
        """
    )
    assert printed.strip() == "['ask Echo', 'receive Echo']"
