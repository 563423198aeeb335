"""One conversation = one workflow (id = session id), running the same agent loop as ``Agent``.

Commands that can be refused are Updates whose validators refuse (AGENT_BUSY, INVALID_MESSAGE_ROLE,
RATE_LIMITED, validation errors) before anything reaches history, steering and follow-ups included;
abort is a Signal; state is read through Queries. Every loop event goes to a Workflow Stream (topic
``events``) with offsets; the model activity publishes its deltas to the same stream.

Determinism: ids and time come from ``workflow.uuid4()`` / ``workflow.now()`` (through
``TemporalRuntime`` and ``Transcript``), so a replay rebuilds the same entries with the same ids.
Pydantic models live in ``agentcore``, never in this package. The agentcore worker passes this package
through the sandbox (imported once per process); a runner that does not would re-execute it for every
run, building its models again each time.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import timedelta

from temporalio import workflow
from temporalio.contrib.workflow_streams import WorkflowStream, WorkflowStreamState
from temporalio.exceptions import ActivityError, ApplicationError

with workflow.unsafe.imports_passed_through():
    import orjson

    from agentcore import errors
    from agentcore.approvals import ApprovalWaitSetAside
    from agentcore.events import (
        AgentEvent,
    )
    from agentcore.loop import (
        AgentContext,
        AgentLoopConfig,
        agent_loop,
        agent_loop_continue,
        agent_loop_resume,
        skipping_first_poll,
    )
    from agentcore.messages import AssistantMessage, Message
    from agentcore.protocol import (
        WORKFLOW_NAME,
        AppendInput,
        ConversationInput,
        ImportSessionInput,
        PendingRun,
    )
    from agentcore.runtime import AbortSignal
    from agentcore.session.entries import (
        ActiveToolsChangeEntry,
        ModelChangeEntry,
        ThinkingLevelChangeEntry,
    )
    from agentcore.session.stats import SessionStats
    from agentcore.subagents import subagent_result
    from agentcore.tools import AgentToolResult, ToolSpec
    from agentcore.transcript import Transcript, add_message_to_stats

from . import policies
from .approvals import ApprovalHandlers
from .commands import CommandHandlers
from .event_log import EventLog
from .inbox import Inbox
from .runs import Runs
from .runtime import TemporalRuntime, messages_built_by_the_activity
from .schedules import ScheduleHandlers
from .session_writer import FLUSH_DELAY, SessionWriter
from .state import _failure
from .streaming import StreamedMessage
from .subagent_links import Subagents
from .subagents import SUBAGENT_ABORT_REASON, SubagentHandlers
from .task_guard import TaskGuard
from .tree import TreeHandlers
from .visibility import Visibility
from .wakeup_timers import PendingWakeups
from .wakeups import WakeupHandlers

APPEND_ACTIVITY = "session.append"  # don't rename: recorded in histories
IMPORT_ACTIVITY = "session.import"


@workflow.defn(name=WORKFLOW_NAME)
class ConversationWorkflow(
    CommandHandlers, TreeHandlers, WakeupHandlers, ScheduleHandlers, ApprovalHandlers, SubagentHandlers
):
    @workflow.init
    def __init__(self, inp: ConversationInput, stream_state: WorkflowStreamState | None = None) -> None:
        self.task_guard = TaskGuard()  # ``task_guard.py``: watching from the run's first step
        # Made here: ``WorkflowStream`` registers its handlers from the workflow's ``__init__`` only.
        self.event_log = EventLog(WorkflowStream(prior_state=stream_state), inp.limits, stream_state)
        self.streaming = StreamedMessage(inp.retries)
        self.inbox = Inbox.carried(inp, lambda: self.transcript.message_count)
        self.visibility = Visibility(inp.search_attributes)
        self.session_id, self.config, self.limits = inp.session_id, inp.config, inp.limits
        self.session = SessionWriter(inp.session_created, inp.session_metadata)
        self.runtime = TemporalRuntime(self)
        self.transcript = self._transcript(inp)
        self.stats: SessionStats = inp.stats or SessionStats()
        self.runs = Runs(self._pending_run(inp), inp.run_count, inp.error_message)
        self.approvals = self._approval_gate(inp)
        # A sub-agent's conversation (``workflows/subagents.py``): its progress goes to the parent, its
        # run's result is the workflow's, and a cancellation (the parent's abort) aborts its run.
        self.subagents = Subagents(inp.session_id, inp.subagent)
        self._link_approvals()
        # In ``__init__``: an update may come before ``run`` starts the carried timers.
        self.wakeups = PendingWakeups()
        self.schedules = list(inp.schedules)

    def _transcript(self, inp: ConversationInput) -> Transcript:
        """The messages handed over, with the entries not yet written; ids and time from the runtime."""
        return Transcript(
            new_id=self.runtime.new_id,
            now_ms=self.runtime.now_ms,
            messages=inp.messages,
            first_message_index=inp.first_message_index,
            leaf_id=inp.leaf_id,
            unwritten=inp.unwritten,
            entry_ids=inp.message_entry_ids or None,
            task=self.runtime.task,
        )

    def _pending_run(self, inp: ConversationInput) -> PendingRun | None:
        """The run the conversation starts with: the one handed over, if any."""
        last = self.transcript.last_message
        if (
            inp.pending_approvals
            and inp.pending_run is None
            and isinstance(last, AssistantMessage)
            and {p.tool_call_id for p in inp.pending_approvals} & {c.id for c in last.tool_calls}
        ):
            # Recovered while calls waited for a person: they are asked again (``agent_loop_resume``).
            return PendingRun(id="resume-approvals", kind="resume")
        return inp.pending_run

    @workflow.run
    async def run(
        self, inp: ConversationInput, stream_state: WorkflowStreamState | None = None
    ) -> AgentToolResult | None:
        # First: no activation of this run may act on events ahead of their workflow task.
        self._task_guard_watch = asyncio.create_task(self.task_guard.watch(), name="task guard")
        if inp.subagent is not None:
            return await self.serve_as_subagent(inp)
        await self.serve(inp)
        return None

    async def serve_as_subagent(self, inp: ConversationInput) -> AgentToolResult:
        """The child's workflow: serve the conversation until its one run ended, turning a cancellation
        (the parent's abort, or the parent closing) into an abort of that run.

        The conversation runs in a task of its own: a workflow's cancellation reaches only its main
        task, so the run is not cut off where it stands; it ends the way an abort ends it."""
        body = asyncio.create_task(self.serve(inp))
        while not body.done():
            try:
                await workflow.wait_condition(body.done)
            except asyncio.CancelledError:
                self.abort_run(SUBAGENT_ABORT_REASON)
        await body
        outcome = self.subagents.outcome
        assert outcome is not None  # ``serve`` returns once the run ended
        return outcome

    async def serve(self, inp: ConversationInput) -> None:
        """The conversation: runs as they come, the session file written, continue-as-new when due.
        A sub-agent's conversation returns once its one run ended and was written."""
        # Held here: the event loop keeps only a weak reference to a task.
        self._releaser = asyncio.create_task(self.event_log.release_when_waiting(), name="release events")
        if not inp.session_created and inp.run_count == 0 and not inp.unwritten:
            self._record_initial_settings(inp)
        if inp.import_session_from is not None:
            await self._import_session(inp.import_session_from)
        if self.config.tool_names:
            specs, unknown = await self._describe_tools(self.config.tool_names)
            # Start with the tools the workers know; name the others where an operator looks.
            self.config.tools, self.config.tool_names = specs, []
            if unknown:
                self.runs.note_error(
                    f"{errors.TOOL_NOT_FOUND}: no worker registers the tool(s): {', '.join(unknown)}"
                )
        self._start_wakeups(inp.wakeups)
        self.runs.ready()
        self._set_details()
        # Held here: the event loop keeps only a weak reference to a task.
        self._indexer = asyncio.create_task(self._index_runs_that_outlast_their_task(), name="index runs")
        while True:
            await workflow.wait_condition(
                lambda: (
                    self.runs.pending is not None
                    or (bool(self.transcript.unwritten) and not self.session.blocked)
                    or self._continue_as_new_due()
                )
            )
            if self.runs.pending is not None:
                await self._run_agent(self.runs.pending)
                if self.runs.pending is None and self._continue_as_new_due():
                    # Roll over before the next run: back-to-back runs leave no pause, and a run
                    # taken here would grow the history on.
                    self.runs.roll_over()
            if self.runs.set_aside:
                await self._continue_as_new()  # a run set aside while its calls wait for approval
            if self.subagents.run is not None and self.subagents.outcome is not None:
                await self._end_subagent()
                return
            await self._defer_flush()
            # Continuing as new, the unwritten entries go with the next run, whose first task
            # writes them from inside itself (made in an earlier run, they count as committed): no
            # session.append round trip here, and the roll-over ends in the task the run ended in.
            due = self.runs.pending is None and self._continue_as_new_due()
            if (
                not due
                and self.runs.pending is None
                and self.transcript.unwritten
                and not self.session.blocked
            ):
                await self._flush()
            if self.runs.pending is None and self.visibility.deferred:
                self._index()
            if due:
                await self._continue_as_new()

    async def _end_subagent(self) -> None:
        """A sub-agent's run ended: its entries written and its progress delivered before the result."""
        self.event_log.release()
        if self.transcript.unwritten and not self.session.blocked:
            await self._flush()
        if self.visibility.deferred:
            self._index()
        if (progress := self.subagents.progress) is not None:
            await progress.drained()
        await workflow.wait_condition(workflow.all_handlers_finished)

    def abort_run(self, reason: str) -> None:
        """Abort the run going on, or the next one before it starts (a sub-agent cancelled early)."""
        if self.runs.abort_from_parent(reason):
            self._set_details()

    def _record_initial_settings(self, inp: ConversationInput) -> None:
        # The session file alone must rebuild the conversation: settings become entries up front.
        self.transcript.add(ModelChangeEntry(model=self.config.model))
        self.transcript.add(ThinkingLevelChangeEntry(thinking_level=self.config.thinking_level))
        if self.config.tool_names or self.config.tools:
            names = self.config.tool_names or [tool.name for tool in self.config.tools]
            self.transcript.add(ActiveToolsChangeEntry(active_tools=names))
        messages = self.transcript.messages
        self.transcript.replace_messages([], [])
        for message in messages:
            self.transcript.add_message(message)
            self.stats = add_message_to_stats(self.stats, message)

    async def _run_agent(self, run: PendingRun) -> None:
        abort_signal = self.runs.start()
        self.session.run_started(workflow.now())
        self._set_details()
        # Indexed as running only if it outlasts this workflow task (``_index_runs_that_outlast_their_task``):
        # a quick run then costs one upsert (idle, with its counts, at the end), not two.
        self.visibility.run_started(self.runtime.task())
        context = AgentContext(
            system_prompt=self.config.system_prompt,
            messages=list(self.transcript.messages),
            tools=list(self.config.tools),
        )
        config = AgentLoopConfig(
            model=self.config.model,
            thinking_level=self.config.thinking_level,
            tool_execution=self.config.tool_execution,
            runtime=self.runtime,
            convert_to_llm=messages_built_by_the_activity,
            get_steering_messages=(
                skipping_first_poll(self._take_steering)
                if run.skip_initial_steering_poll
                else self._take_steering
            ),
            get_follow_up_messages=self._take_follow_up,
            max_concurrent_tools=self.limits.max_concurrent_tools,
            max_tokens=self.config.max_tokens,
            temperature=self.config.temperature,
            session_id=self.session_id,
            compact_context=self._compact_when_due,
            activate_tools=self._activate_tools,
            approvals=self.approvals,
        )
        if run.kind == "prompt":
            events = agent_loop(list(run.messages), context, config, abort_signal)
        elif run.kind == "resume":
            events = agent_loop_resume(context, config, abort_signal)
        else:
            events = agent_loop_continue(context, config, abort_signal)
        closed = False
        try:
            async for event in events:
                self._apply(event)
                self.publish(event)
                if (progress := self.subagents.progress) is not None:
                    progress.forward(event)
                if event.type == "tool_execution_end" and self.wakeups.unannounced:
                    self._announce_tool_wakeup(event.tool_call_id)
        except GeneratorExit:
            # Closed by Python's garbage collector, not cancelled: the worker stopped and left this
            # run in its cache (the SDK evicts only runs with work pending). No workflow API
            # answers now; there is nothing to record either.
            closed = True
            raise
        except ApprovalWaitSetAside:
            # Every call of the batch waits for a person and the history is due to continue as
            # new: the next run takes the calls up again (``workflows/approvals.py``).
            self.runs.set_aside_for_approvals(self.approvals.pending())
        finally:
            if not closed:
                self._end_run()

    def _end_run(self) -> None:
        self.runs.end()
        self.streaming.stop()
        self.event_log.truncate()
        self._set_details()
        self.visibility.run_indexed()
        self.session.run_ended(workflow.now())
        # A run whose entries wait for the deferred flush goes idle in the index with the flush:
        # back-to-back runs then make no upsert each (a history event and a visibility write).
        if self._flush_deferred():
            self.visibility.defer()
        else:
            self._index()

    async def _compact_when_due(
        self, messages: list[Message], signal: AbortSignal, emit: Callable[[AgentEvent], None]
    ) -> list[Message] | None:
        """The loop's auto-compaction, before a model call's events begin (as in-process). The model
        activity reads the context from the session file, so the loop's own copy only follows."""
        if not self.compaction_due():
            return None
        await self.compact("threshold", emit=emit, signal=signal)
        return list(self.transcript.messages)

    async def _activate_tools(self, names: list[str]) -> list[ToolSpec]:
        """Tools a tool result named (``added_tool_names``) that a worker registers become active,
        recorded in the session as the new active set."""
        specs, _unknown = await self._describe_tools(names)
        if specs:
            self.config.tools = [*self.config.tools, *specs]
            self.transcript.add(
                ActiveToolsChangeEntry(active_tools=[tool.name for tool in self.config.tools])
            )
        return specs

    def _apply(self, event: AgentEvent) -> None:
        """The state reducer (as pi's Agent): streaming message, transcript, pending tools, errors."""
        if event.type == "message_start":
            if isinstance(event.message, AssistantMessage):
                # Deltas the model activity publishes from here on rebuild the partial on query.
                self.streaming.start(event.message)
        elif event.type == "message_end":
            self.streaming.end()
            # None unless the model call's activity wrote the message itself (then not again).
            self.transcript.add_message(event.message, written_as=self.runtime.written_as(event.message))
            if isinstance(event.message, AssistantMessage):
                self.streaming.record_retry(self.transcript.entry_ids[-1])
            self.stats = add_message_to_stats(self.stats, event.message)
            if isinstance(event.message, AssistantMessage):
                self.runs.batch_began()
        elif event.type == "tool_execution_start":
            self.runs.tool_started(event.tool_call_id)
        elif event.type == "tool_execution_end":
            self.runs.tool_ended(event.tool_call_id)
        elif event.type == "turn_end":
            message = event.message
            if isinstance(message, AssistantMessage) and message.error_message:
                self.runs.note_error(message.error_message)
        elif event.type == "agent_end" and (subagent := self.subagents.run) is not None:
            self.subagents.ended(subagent_result(subagent.tool_name, self.session_id, event.messages))

    async def _defer_flush(self) -> None:
        """Let the next run write what this workflow task made, if it comes within ``FLUSH_DELAY``.

        A run may end with entries its last model call did not write (made after that call: an
        aborted tool batch, a refused call, a wake-up's note): flushed at once, such a run would
        cost one more activity and workflow task. Deferred, the next run's first model call writes them, back to back
        runs pay nothing, and the session file lags the workflow by ``FLUSH_DELAY`` at most (less
        when a client waits for the conversation to be idle, which asks for the flush at once).
        """
        if not self._flush_deferred():
            return
        # Paced by a person: the entries are in the history once this task is, so the next task,
        # whatever brings it (mostly a subscriber's next poll), may write them; that saves the
        # timer's own workflow task for every message. Back-to-back runs keep waiting for the next run.
        paced = self.session.paced
        length = self.runtime.task()
        try:
            await workflow.wait_condition(
                lambda: (
                    self.runs.pending is not None
                    or self.session.waited_for
                    or self._continue_as_new_due()
                    or (paced and self.runtime.task() > length)
                ),
                timeout=FLUSH_DELAY,
            )
        except TimeoutError:
            # Under load the next prompt may come in the task the timer fired in: not a pause.
            self.session.flush_waited(timed_out=True, run_came=self.runs.pending is not None)
        else:
            self.session.flush_waited(timed_out=False, run_came=self.runs.pending is not None)

    def _flush_deferred(self) -> bool:
        """Whether ``_defer_flush`` waits: this task made entries that only the flush will write."""
        return not self.session.blocked and bool(self.transcript.split_committed()[1])

    async def _flush(self) -> None:
        entries = list(self.transcript.unwritten)
        append = AppendInput(session_id=self.session_id, entries=entries, create=self.session_create())
        try:
            await workflow.execute_activity(
                APPEND_ACTIVITY,
                append,
                start_to_close_timeout=policies.SESSION_WRITE.start_to_close,
                # The activity beats while its write waits: a worker that dies mid-write is noticed
                # as soon as a model call's would be, not after the 30 s backstop.
                heartbeat_timeout=timedelta(seconds=self.limits.llm_heartbeat_seconds),
                retry_policy=policies.SESSION_WRITE.retry,
                summary=f"append {len(entries)} entries",
            )
        except ActivityError as err:
            # Keep the entries (nothing is lost) and stop retrying until something changes.
            self.session.block()
            self.runs.note_error(f"Session file write failed: {err.cause or err}")
            self._set_details()
            return
        self.transcript.mark_written(entries)
        self.session.written()

    async def _import_session(self, source: str) -> None:
        """Have a worker place the session file a client recovered from (``AgentClient.recover``
        without the sessions directory) before anything is written to it."""
        try:
            await workflow.execute_activity(
                IMPORT_ACTIVITY,
                ImportSessionInput(session_id=self.session_id, source=source),
                start_to_close_timeout=policies.SESSION_WRITE.start_to_close,
                retry_policy=policies.SESSION_WRITE.retry,
                summary=f"import {source}",
            )
        except ActivityError as err:
            # Without its file the conversation has nowhere to write (and a different file under its
            # name must not be written to): it ends here, saying why; ``recover`` raises that.
            code, reason = _failure(err, errors.SESSION_ERROR)
            error = ApplicationError(
                f"the session file could not be imported: {reason}", type=code, non_retryable=True
            )
            self.session.import_failed(error)
            # ``wait_for_idle`` (``recover`` waits on it) answers with the error before the run ends.
            await workflow.wait_condition(workflow.all_handlers_finished)
            raise error from None

    def _continue_as_new_due(self) -> bool:
        info = workflow.info()
        return info.is_continue_as_new_suggested() or (
            self.runtime.task() >= self.limits.continue_as_new_after_events
        )

    async def _continue_as_new(self) -> None:
        # From here on a prompt or continue is refused as ROLLING_OVER (the client sends it again, to
        # the next run): pollers once detached cannot be attached again, so this run takes no new run.
        self.runs.roll_over()
        self.event_log.release()
        self.event_log.detach_pollers()
        await workflow.wait_condition(workflow.all_handlers_finished)
        self.event_log.truncate(keep=self.limits.retained_events // 5)
        stream_state = self.event_log.carried(self.limits.carried_message_bytes)
        messages, entry_ids, first_index = self.transcript.carry_tail(
            self.limits.carried_message_bytes, lambda m: len(orjson.dumps(m.model_dump(mode="json")))
        )
        carry = ConversationInput(
            session_id=self.session_id,
            config=self.config,
            limits=self.limits,
            messages=messages,
            message_entry_ids=entry_ids,
            first_message_index=first_index,
            leaf_id=self.transcript.leaf_id,
            unwritten=self.transcript.unwritten,
            session_created=self.session.created,
            session_metadata=self.session.metadata,
            steering_queue=self.inbox.steering,
            follow_up_queue=self.inbox.follow_up,
            seen_ids=self.inbox.seen_ids,
            recent_message_times=self.inbox.recent_message_times,
            error_message=self.runs.error_message,
            search_attributes=self.visibility.enabled,
            run_count=self.runs.count,
            stats=self.stats,
            pending_run=self.runs.pending,
            wakeups=self.wakeups.pending,
            schedules=self.schedules,
            pending_approvals=self.runs.set_aside,
            retries=self.streaming.retries,
            waiting_prompts=self.inbox.waiting_prompts,
        )
        workflow.continue_as_new(args=[carry, stream_state])
