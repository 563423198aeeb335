"""One conversation = one workflow (id = session id), running the same agent loop as ``Agent``.

Commands that can be refused are Updates whose validators refuse (AGENT_BUSY, INVALID_MESSAGE_ROLE,
RATE_LIMITED, validation errors) before anything reaches history; steering, follow-ups and abort are
Signals; state is read through Queries. Every loop event goes to a Workflow Stream (topic
``events``) with offsets; the model activity publishes its deltas to the same stream.

Determinism: ids and time come from ``workflow.uuid4()`` / ``workflow.now()`` (through
``TemporalRuntime`` and ``Transcript``), so a replay rebuilds the same entries with the same ids.
Pydantic models live in ``agentcore`` (passed through), never in this module: the sandbox re-executes
this module for every run.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

from temporalio import workflow
from temporalio.contrib.workflow_streams import WorkflowStream, WorkflowStreamState
from temporalio.exceptions import ActivityError, ApplicationError

with workflow.unsafe.imports_passed_through():
    import orjson

    from agentcore import errors
    from agentcore.compaction import compaction_end_event, estimate_context_tokens, should_compact
    from agentcore.events import (
        AgentEvent,
        CompactionEndEvent,
        CompactionReason,
        CompactionStartEvent,
        MessageUpdateEvent,
    )
    from agentcore.loop import AgentContext, AgentLoopConfig, agent_loop, agent_loop_continue
    from agentcore.messages import AssistantMessage, Message
    from agentcore.model import QueueMode
    from agentcore.partial import apply_delta
    from agentcore.protocol import (
        EVENTS_TOPIC,
        WORKFLOW_NAME,
        AbortRequest,
        Accepted,
        AppendInput,
        BranchInput,
        BranchRequest,
        BranchResult,
        CommandRequest,
        CompactInput,
        CompactRequest,
        CompactResult,
        ConversationInput,
        DescribeToolsInput,
        DescribeToolsResult,
        DurableState,
        LabelRequest,
        MessagesPage,
        MessagesQuery,
        PendingRun,
        PromptRequest,
        QueuedMessage,
        QueuesState,
        SessionCreate,
        SessionNameRequest,
        SetModelRequest,
        SetSystemPromptRequest,
        SetThinkingLevelRequest,
        SetToolsRequest,
    )
    from agentcore.runtime import AbortSignal
    from agentcore.search_attributes import AGENT_COST_USD, AGENT_MESSAGE_COUNT, AGENT_MODEL, AGENT_STATUS
    from agentcore.session.entries import (
        SYSTEM_PROMPT_CUSTOM_TYPE,
        ActiveToolsChangeEntry,
        CustomEntry,
        LabelEntry,
        ModelChangeEntry,
        SessionInfoEntry,
        ThinkingLevelChangeEntry,
    )
    from agentcore.session.stats import SessionStats
    from agentcore.temporal.connect import search_attribute_keys
    from agentcore.tools import ToolSpec
    from agentcore.transcript import Transcript, add_entry_usage_to_stats, add_message_to_stats

from . import policies
from .runtime import TemporalRuntime

SEEN_IDS_KEPT = 2_000
# Search-attribute upserts are commands recorded in history; runs recorded before they existed have
# none, so this marker keeps those histories replayable.
PATCH_SEARCH_ATTRIBUTES = "search-attributes-v1"
APPEND_ACTIVITY = "session.append"  # don't rename: recorded in histories
DESCRIBE_TOOLS_ACTIVITY = "tools.describe"  # don't rename: recorded in histories
COMPACT_ACTIVITY = "session.compact"  # don't rename: recorded in histories
BRANCH_ACTIVITY = "session.branch"  # don't rename: recorded in histories


def _refuse(code: str, message: str) -> ApplicationError:
    # ``type`` carries the spec's code so the client rebuilds the same typed error.
    return ApplicationError(message, type=code, non_retryable=True)


@workflow.defn(name=WORKFLOW_NAME)
class ConversationWorkflow:
    @workflow.init
    def __init__(self, inp: ConversationInput, stream_state: WorkflowStreamState | None = None) -> None:
        self.stream = WorkflowStream(prior_state=stream_state)
        self.events = self.stream.topic(EVENTS_TOPIC)
        self.session_id = inp.session_id
        self.config = inp.config
        self.limits = inp.limits
        self.session_created = inp.session_created
        self.session_metadata = inp.session_metadata
        self.runtime = TemporalRuntime(self)
        self.transcript = Transcript(
            new_id=self.runtime.new_id,
            now_ms=self.runtime.now_ms,
            messages=inp.messages,
            first_message_index=inp.first_message_index,
            leaf_id=inp.leaf_id,
            unwritten=inp.unwritten,
            entry_ids=inp.message_entry_ids or None,
        )
        self.stats: SessionStats = inp.stats or SessionStats()
        self.steering: list[QueuedMessage] = list(inp.steering_queue)
        self.follow_up: list[QueuedMessage] = list(inp.follow_up_queue)
        self.pending_run: PendingRun | None = inp.pending_run
        self.seen_ids: OrderedDict[str, None] = OrderedDict((i, None) for i in inp.seen_ids)
        self.recent_message_times: list[int] = list(inp.recent_message_times)
        self.error_message = inp.error_message
        self.search_attributes = inp.search_attributes
        self.run_count = inp.run_count
        self.running = False
        self.abort_signal: AbortSignal | None = None
        self.streaming_message: AssistantMessage | None = None
        self.pending_tool_calls: set[str] = set()
        self.write_blocked = False
        self.initialized = False
        self._indexed: tuple[Any, ...] | None = None
        self._streaming_from = 0
        self.compacting = False

    # ------------------------------------------------------------------------------------- main loop

    @workflow.run
    async def run(self, inp: ConversationInput, stream_state: WorkflowStreamState | None = None) -> None:
        if not inp.session_created and inp.run_count == 0 and not inp.unwritten:
            self._record_initial_settings(inp)
        if self.config.tool_names:
            specs, unknown = await self._describe_tools(self.config.tool_names)
            # Start with the tools the workers know; name the others where an operator looks.
            self.config.tools, self.config.tool_names = specs, []
            if unknown:
                self.error_message = (
                    f"{errors.TOOL_NOT_FOUND}: no worker registers the tool(s): {', '.join(unknown)}"
                )
        self.initialized = True
        self._set_details()
        while True:
            await workflow.wait_condition(
                lambda: (
                    self.pending_run is not None
                    or (bool(self.transcript.unwritten) and not self.write_blocked)
                    or self._continue_as_new_due()
                )
            )
            if self.pending_run is not None:
                await self._run_agent(self.pending_run)
            if self.transcript.unwritten and not self.write_blocked:
                await self._flush()
            if self.pending_run is None and self._continue_as_new_due():
                await self._continue_as_new()

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
        self.pending_run = None
        self.running = True
        self.abort_signal = AbortSignal()
        self.error_message = None
        self.write_blocked = False
        self.run_count += 1
        self._set_details()
        self._index()
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
            get_steering_messages=self._take_steering,
            get_follow_up_messages=self._take_follow_up,
            max_concurrent_tools=self.limits.max_concurrent_tools,
            max_tokens=self.config.max_tokens,
            temperature=self.config.temperature,
            session_id=self.session_id,
        )
        if run.kind == "prompt":
            events = agent_loop(list(run.messages), context, config, self.abort_signal)
        else:
            events = agent_loop_continue(context, config, self.abort_signal)
        try:
            async for event in events:
                self._apply(event)
                self._publish(event)
        finally:
            self.running = False
            self.abort_signal = None
            self.streaming_message = None
            self.pending_tool_calls.clear()
            self._truncate_events()
            self._set_details()
            self._index()

    def _apply(self, event: AgentEvent) -> None:
        """The state reducer (as pi's Agent): streaming message, transcript, pending tools, errors."""
        if event.type == "message_start":
            if isinstance(event.message, AssistantMessage):
                self.streaming_message = event.message
                # Deltas published from here on (by the model activity) rebuild the partial on query.
                self._streaming_from = self.stream._on_offset() + 1
        elif event.type == "message_end":
            self.streaming_message = None
            written = self.runtime.written_message
            written_as = None
            if written is not None and written[0] is event.message:
                written_as = written[1]
                self.runtime.written_message = None
            self.transcript.add_message(event.message, written_as=written_as)
            self.stats = add_message_to_stats(self.stats, event.message)
        elif event.type == "tool_execution_start":
            self.pending_tool_calls.add(event.tool_call_id)
        elif event.type == "tool_execution_end":
            self.pending_tool_calls.discard(event.tool_call_id)
        elif event.type == "turn_end":
            message = event.message
            if isinstance(message, AssistantMessage) and message.error_message:
                self.error_message = message.error_message

    def _publish(self, event: AgentEvent | CompactionStartEvent | CompactionEndEvent) -> None:
        if isinstance(event, MessageUpdateEvent) and event.message is not None:
            # Deltas travel without the partial message: a subscriber rebuilds it, the log stays lean.
            event = event.model_copy(update={"message": None})
        self.events.publish(event)

    def _take_steering(self) -> list[Message]:
        return self._take(self.steering, self.config.steering_mode)

    def _take_follow_up(self) -> list[Message]:
        return self._take(self.follow_up, self.config.follow_up_mode)

    @staticmethod
    def _take(queue: list[QueuedMessage], mode: QueueMode) -> list[Message]:
        if not queue:
            return []
        taken = queue[:] if mode == QueueMode.ALL else queue[:1]
        del queue[: len(taken)]
        return [item.message for item in taken]

    # ---------------------------------------------------------------------------------- session file

    def session_create(self) -> SessionCreate | None:
        """How to create the session file, until an activity has created it."""
        if self.session_created:
            return None
        metadata = {"system_prompt": self.config.system_prompt, **self.session_metadata}
        return SessionCreate(cwd=metadata.pop("cwd", None), metadata=metadata)

    async def _flush(self) -> None:
        entries = list(self.transcript.unwritten)
        try:
            await workflow.execute_activity(
                APPEND_ACTIVITY,
                AppendInput(session_id=self.session_id, entries=entries, create=self.session_create()),
                start_to_close_timeout=policies.SESSION_WRITE.start_to_close,
                retry_policy=policies.SESSION_WRITE.retry,
                summary=f"append {len(entries)} entries",
            )
        except ActivityError as err:
            # Keep the entries (nothing is lost) and stop retrying until something changes.
            self.write_blocked = True
            self.error_message = f"Session file write failed: {err.cause or err}"
            self._set_details()
            return
        self.transcript.mark_written(entries)
        self.session_created = True

    async def _describe_tools(self, names: list[str]) -> tuple[list[ToolSpec], list[str]]:
        """Specs for ``names`` from the workers' registry, and the names none of them registers."""
        result: DescribeToolsResult = await workflow.execute_activity(
            DESCRIBE_TOOLS_ACTIVITY,
            DescribeToolsInput(names=names),
            result_type=DescribeToolsResult,
            start_to_close_timeout=policies.DESCRIBE_TOOLS.start_to_close,
            retry_policy=policies.DESCRIBE_TOOLS.retry,
            summary=f"describe {', '.join(names)}",
        )
        return result.tools, result.unknown

    # ----------------------------------------------------------------------------------- compaction

    def compaction_due(self) -> bool:
        settings = self.config.compaction
        return settings.enabled and should_compact(self.transcript.messages, self.config.model, settings)

    async def compact(
        self, reason: CompactionReason, instructions: str | None = None, *, will_retry: bool = False
    ) -> CompactionEndEvent:
        """Summarise the older part of the path (an activity) and go on from the compacted context."""
        tokens_before = estimate_context_tokens(self.transcript.messages)
        self._publish(CompactionStartEvent(reason=reason))
        entries = list(self.transcript.unwritten)
        try:
            result: CompactResult = await workflow.execute_activity(
                COMPACT_ACTIVITY,
                CompactInput(
                    session_id=self.session_id,
                    model=self.config.model,
                    entries=entries,
                    leaf_id=self.transcript.leaf_id,
                    entry_id=self.runtime.new_id(),
                    reason=reason,
                    instructions=instructions,
                    settings=self.config.compaction,
                    create=self.session_create(),
                ),
                result_type=CompactResult,
                start_to_close_timeout=policies.COMPACTION.start_to_close,
                retry_policy=policies.COMPACTION.retry,
                summary=f"compact ({reason})",
            )
        except ActivityError as err:
            # The conversation goes on uncompacted (an overflow then surfaces as the model's error).
            end = CompactionEndEvent(
                reason=reason, tokens_before=tokens_before, error_message=str(err.cause or err)
            )
            self._publish(end)
            return end
        self.transcript.mark_written(entries)
        self.session_created = True
        if result.entry is None:
            end = CompactionEndEvent(reason=reason, tokens_before=tokens_before, tokens_after=tokens_before)
        else:
            self.transcript.replace_messages(result.messages, result.message_entry_ids)
            self.transcript.leaf_id = result.entry.id
            self.stats = add_entry_usage_to_stats(self.stats, result.entry)
            end = compaction_end_event(result.entry, reason=reason, will_retry=will_retry)
        self._publish(end)
        self._set_details()
        return end

    @workflow.update(name="compact")
    async def compact_(self, request: CompactRequest) -> CompactionEndEvent:
        self.compacting = True
        try:
            return await self.compact("manual", request.instructions)
        finally:
            self.compacting = False

    @compact_.validator
    def _validate_compact(self, request: CompactRequest) -> None:
        self._refuse_if_busy("compact")

    # ------------------------------------------------------------------------------ branches, labels

    @workflow.update(name="branch")
    async def branch(self, request: BranchRequest) -> BranchResult:
        """Move back to an earlier entry; the abandoned branch stays in the file, optionally summarised."""
        self.compacting = True
        entries = list(self.transcript.unwritten)
        try:
            result: BranchResult = await workflow.execute_activity(
                BRANCH_ACTIVITY,
                BranchInput(
                    session_id=self.session_id,
                    model=self.config.model,
                    entries=entries,
                    leaf_id=self.transcript.leaf_id,
                    target_entry_id=request.target_entry_id,
                    summary=request.summary,
                    summarize=request.summarize,
                    instructions=request.instructions,
                    leaf_entry_id=self.runtime.new_id(),
                    summary_entry_id=self.runtime.new_id(),
                    settings=self.config.compaction,
                    create=self.session_create(),
                ),
                result_type=BranchResult,
                start_to_close_timeout=policies.COMPACTION.start_to_close,
                retry_policy=policies.COMPACTION.retry,
                summary=f"branch to {request.target_entry_id or 'start'}",
            )
        except ActivityError as err:
            cause = err.cause
            code = (
                cause.type if isinstance(cause, ApplicationError) and cause.type else errors.VALIDATION_ERROR
            )
            raise _refuse(
                code, f"branch failed: {cause.message if isinstance(cause, ApplicationError) else err}"
            ) from None
        finally:
            self.compacting = False
        self.transcript.mark_written(entries)
        self.session_created = True
        self.transcript.replace_messages(result.messages, result.message_entry_ids)
        self.transcript.leaf_id = result.leaf_id
        if result.summary_entry is not None:
            self.stats = add_entry_usage_to_stats(self.stats, result.summary_entry)
        self._set_details()
        return result

    @branch.validator
    def _validate_branch(self, request: BranchRequest) -> None:
        self._refuse_if_busy("branch")

    @workflow.update(name="set_label")
    async def set_label(self, request: LabelRequest) -> Accepted:
        self.transcript.add(LabelEntry(target_id=request.target_entry_id, label=request.label or None))
        return Accepted(id=request.id, message_count=self.transcript.message_count)

    @set_label.validator
    def _validate_set_label(self, request: LabelRequest) -> None:
        known = {entry_id for entry_id in self.transcript.entry_ids if entry_id} | {
            entry.id for entry in self.transcript.unwritten
        }
        if self.transcript.leaf_id:
            known.add(self.transcript.leaf_id)
        if request.target_entry_id not in known:
            raise _refuse(
                errors.VALIDATION_ERROR,
                f"target_entry_id: {request.target_entry_id!r} is not an entry of this conversation's context",
            )

    @workflow.update(name="set_session_name")
    async def set_session_name(self, request: SessionNameRequest) -> Accepted:
        self.transcript.add(SessionInfoEntry(name=request.name))
        return Accepted(id=request.id, message_count=self.transcript.message_count)

    @set_session_name.validator
    def _validate_set_session_name(self, request: SessionNameRequest) -> None:
        if not request.name.strip():
            raise _refuse(errors.VALIDATION_ERROR, "name: must be a non-empty string")

    # ------------------------------------------------------------------------------ continue-as-new

    def _continue_as_new_due(self) -> bool:
        info = workflow.info()
        return info.is_continue_as_new_suggested() or (
            info.get_current_history_length() >= self.limits.continue_as_new_after_events
        )

    async def _continue_as_new(self) -> None:
        self.stream.detach_pollers()
        await workflow.wait_condition(workflow.all_handlers_finished)
        if self.pending_run is not None:
            # A prompt landed while handlers drained: run it first (with subscribers attached again;
            # WorkflowStream has no public way to undo ``detach_pollers``), roll over after.
            self.stream._detaching = False
            return
        self._truncate_events(
            keep=self.limits.retained_events // 5, keep_bytes=self.limits.carried_message_bytes
        )
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
            session_created=self.session_created,
            session_metadata=self.session_metadata,
            steering_queue=self.steering,
            follow_up_queue=self.follow_up,
            seen_ids=list(self.seen_ids),
            recent_message_times=self.recent_message_times,
            error_message=self.error_message,
            search_attributes=self.search_attributes,
            run_count=self.run_count,
            stats=self.stats,
        )
        workflow.continue_as_new(args=[carry, self.stream.get_state()])

    def _truncate_events(self, keep: int | None = None, keep_bytes: int | None = None) -> None:
        """Bound the retained event log by count and by bytes (events can carry large tool output;
        the log is memory now and continue-as-new input later, which must stay far below 2 MB)."""
        max_events = self.limits.retained_events if keep is None else keep
        max_bytes = self.limits.retained_event_bytes if keep_bytes is None else keep_bytes
        # WorkflowStream exposes no size view of its log; read it (never mutate it) to pick the cut.
        log = self.stream._log
        kept = size = 0
        for item in reversed(log):
            size += item.data.ByteSize()
            if kept >= max_events or size > max_bytes:
                break
            kept += 1
        end = self.stream._on_offset()
        if kept < len(log):
            self.stream.truncate(end - kept)

    # ------------------------------------------------------------------------------------ updates

    def _busy(self) -> bool:
        return self.running or self.compacting or self.pending_run is not None

    def _seen(self, request_id: str) -> bool:
        return bool(request_id) and request_id in self.seen_ids

    def _remember(self, request_id: str) -> None:
        if not request_id:
            return
        self.seen_ids[request_id] = None
        while len(self.seen_ids) > SEEN_IDS_KEPT:
            self.seen_ids.popitem(last=False)

    def _check_rate(self, incoming: int) -> None:
        limits = self.limits
        if self.transcript.message_count + incoming > limits.max_messages:
            raise _refuse(
                errors.RATE_LIMITED,
                f"Conversation holds {self.transcript.message_count} messages; the limit is {limits.max_messages} "
                "(SPEC-9.1). Start a new session or fork this one.",
            )
        now = self.runtime.now_ms()
        recent = [t for t in self.recent_message_times if now - t < 60_000]
        if len(recent) + incoming > limits.max_messages_per_minute:
            wait = 60 - (now - recent[0]) / 1000 if recent else 60
            raise _refuse(
                errors.RATE_LIMITED,
                f"Over {limits.max_messages_per_minute} messages per minute (SPEC-9.1); retry in {wait:.1f} s.",
            )

    def _count_messages(self, count: int) -> None:
        now = self.runtime.now_ms()
        self.recent_message_times = [t for t in self.recent_message_times if now - t < 60_000]
        self.recent_message_times.extend([now] * count)

    @workflow.update(name="prompt")
    async def prompt(self, request: PromptRequest) -> Accepted:
        if self._seen(request.id):
            return Accepted(id=request.id, status="duplicate", message_count=self.transcript.message_count)
        self._remember(request.id)
        self._count_messages(len(request.messages))
        self.pending_run = PendingRun(id=request.id, kind="prompt", messages=list(request.messages))
        return Accepted(id=request.id, message_count=self.transcript.message_count)

    @prompt.validator
    def _validate_prompt(self, request: PromptRequest) -> None:
        if self._seen(request.id):
            return
        if self._busy():
            raise _refuse(
                errors.AGENT_BUSY, "Agent is already processing a prompt. Use steer() or follow_up()."
            )
        if not request.messages:
            raise _refuse(errors.VALIDATION_ERROR, "messages: a prompt needs at least one message")
        self._check_rate(len(request.messages))

    @workflow.update(name="continue")
    async def continue_(self, request: CommandRequest) -> Accepted:
        if self._seen(request.id):
            return Accepted(id=request.id, status="duplicate", message_count=self.transcript.message_count)
        self._remember(request.id)
        last = self.transcript.last_message
        if isinstance(last, AssistantMessage):
            # pi's rule: from an assistant tail, queued steering (else follow-ups) runs as a prompt.
            queued = self._take_steering() or self._take_follow_up()
            self.pending_run = PendingRun(
                id=request.id, kind="prompt", messages=queued, skip_initial_steering_poll=True
            )
        else:
            self.pending_run = PendingRun(id=request.id, kind="continue")
        return Accepted(id=request.id, message_count=self.transcript.message_count)

    @continue_.validator
    def _validate_continue(self, request: CommandRequest) -> None:
        if self._seen(request.id):
            return
        if self._busy():
            raise _refuse(errors.AGENT_BUSY, "Agent is already processing. Wait for it to finish.")
        last = self.transcript.last_message
        if last is None:
            raise _refuse(errors.INVALID_MESSAGE_ROLE, "No messages to continue from")
        if isinstance(last, AssistantMessage) and not self.steering and not self.follow_up:
            raise _refuse(errors.INVALID_MESSAGE_ROLE, "Cannot continue from message role: assistant")

    @workflow.update(name="reset")
    async def reset(self, request: CommandRequest) -> Accepted:
        if not self._seen(request.id):
            self._remember(request.id)
            self.transcript.reset()
            self.steering.clear()
            self.follow_up.clear()
            self.error_message = None
            self.stats = SessionStats()
            self._set_details()
        return Accepted(id=request.id, message_count=0)

    @reset.validator
    def _validate_reset(self, request: CommandRequest) -> None:
        if not self._seen(request.id) and self._busy():
            raise _refuse(errors.AGENT_BUSY, "Cannot reset while the agent is running; abort it first.")

    @workflow.update(name="set_model")
    async def set_model(self, request: SetModelRequest) -> Accepted:
        if self.config.model != request.model:
            self.config.model = request.model
            self.transcript.add(ModelChangeEntry(model=request.model))
            self._set_details()
        return Accepted(id=request.id, message_count=self.transcript.message_count)

    @set_model.validator
    def _validate_set_model(self, request: SetModelRequest) -> None:
        self._refuse_if_busy("set_model")

    @workflow.update(name="set_thinking_level")
    async def set_thinking_level(self, request: SetThinkingLevelRequest) -> Accepted:
        if self.config.thinking_level != request.thinking_level:
            self.config.thinking_level = request.thinking_level
            self.transcript.add(ThinkingLevelChangeEntry(thinking_level=request.thinking_level))
        return Accepted(id=request.id, message_count=self.transcript.message_count)

    @set_thinking_level.validator
    def _validate_set_thinking_level(self, request: SetThinkingLevelRequest) -> None:
        self._refuse_if_busy("set_thinking_level")

    @workflow.update(name="set_tools")
    async def set_tools(self, request: SetToolsRequest) -> Accepted:
        specs, unknown = await self._describe_tools(list(request.tools)) if request.tools else ([], [])
        if unknown:
            raise _refuse(errors.TOOL_NOT_FOUND, f"No worker registers the tool(s): {', '.join(unknown)}")
        self.config.tools = specs
        self.transcript.add(ActiveToolsChangeEntry(active_tools=list(request.tools)))
        return Accepted(id=request.id, message_count=self.transcript.message_count)

    @set_tools.validator
    def _validate_set_tools(self, request: SetToolsRequest) -> None:
        self._refuse_if_busy("set_tools")
        bad = [name for name in request.tools if not name.isidentifier()]
        if bad:
            raise _refuse(errors.VALIDATION_ERROR, f"tools: invalid tool name(s) {bad}")

    @workflow.update(name="set_system_prompt")
    async def set_system_prompt(self, request: SetSystemPromptRequest) -> Accepted:
        if self.config.system_prompt != request.system_prompt:
            self.config.system_prompt = request.system_prompt
            self.transcript.add(
                CustomEntry(custom_type=SYSTEM_PROMPT_CUSTOM_TYPE, data=request.system_prompt)
            )
        return Accepted(id=request.id, message_count=self.transcript.message_count)

    @set_system_prompt.validator
    def _validate_set_system_prompt(self, request: SetSystemPromptRequest) -> None:
        self._refuse_if_busy("set_system_prompt")

    def _refuse_if_busy(self, what: str) -> None:
        if self._busy():
            raise _refuse(errors.AGENT_BUSY, f"Cannot {what} while the agent is running.")

    @workflow.update(name="wait_for_idle")
    async def wait_for_idle(self, request: CommandRequest) -> Accepted:
        await workflow.wait_condition(
            lambda: self.initialized and not self._busy() and not self.transcript.unwritten
        )
        return Accepted(id=request.id, message_count=self.transcript.message_count)

    # ------------------------------------------------------------------------------------ signals

    @workflow.signal(name="steer")
    def steer(self, item: QueuedMessage) -> None:
        if not self._seen(item.id):
            self._remember(item.id)
            self._count_messages(1)
            self.steering.append(item)

    @workflow.signal(name="follow_up")
    def follow_up_(self, item: QueuedMessage) -> None:
        if not self._seen(item.id):
            self._remember(item.id)
            self._count_messages(1)
            self.follow_up.append(item)

    @workflow.signal(name="abort")
    def abort(self, request: AbortRequest) -> None:
        if self.abort_signal is not None:
            self.abort_signal.abort(request.reason or "aborted by user")
            self._set_details()

    # ------------------------------------------------------------------------------------ queries

    @workflow.query(name="get_state")
    def get_state(self) -> DurableState:
        return DurableState(
            session_id=self.session_id,
            system_prompt=self.config.system_prompt,
            model=self.config.model,
            thinking_level=self.config.thinking_level,
            tools=self.config.tools,
            messages=self.transcript.messages,
            first_message_index=self.transcript.first_message_index,
            message_count=self.transcript.message_count,
            is_streaming=self.running,
            streaming_message=self._streaming_partial(),
            pending_tool_calls=sorted(self.pending_tool_calls),
            error_message=self.error_message,
            status=self._status(),
            steering_queue_length=len(self.steering),
            follow_up_queue_length=len(self.follow_up),
            event_offset=self.stream._on_offset(),
            leaf_id=self.transcript.leaf_id,
        )

    def _streaming_partial(self) -> AssistantMessage | None:
        """The message being streamed, rebuilt from the deltas in the event log (queries only: the
        deltas are folded here, on demand, so streaming costs the workflow nothing)."""
        if self.streaming_message is None:
            return None
        partial = self.streaming_message.model_copy(deep=True)
        converter = workflow.payload_converter()
        start = max(0, self._streaming_from - self.stream._base_offset)
        for item in self.stream._log[start:]:
            event = converter.from_payloads([item.data])[0]
            if isinstance(event, dict) and event.get("type") == "message_update":
                apply_delta(partial, event.get("assistant_message_event") or {})
        return partial

    @workflow.query(name="get_messages")
    def get_messages(self, query: MessagesQuery) -> MessagesPage:
        first = self.transcript.first_message_index
        start = max(query.start, first)
        end = (
            self.transcript.message_count
            if query.end is None
            else min(query.end, self.transcript.message_count)
        )
        window = slice(start - first, max(start, end) - first)
        return MessagesPage(
            messages=self.transcript.messages[window],
            start=start,
            total=self.transcript.message_count,
            entry_ids=self.transcript.entry_ids[window],
        )

    @workflow.query(name="get_session_stats")
    def get_session_stats(self) -> SessionStats:
        return self.stats

    @workflow.query(name="get_queues")
    def get_queues(self) -> QueuesState:
        return QueuesState(steering=self.steering, follow_up=self.follow_up)

    # ------------------------------------------------------------------------------- operator view

    def _status(self) -> Any:
        if self.abort_signal is not None and self.abort_signal.aborted:
            return "aborting"
        return "running" if self.running else "idle"

    def _index(self) -> None:
        """Keep the conversation findable in the UI: status, model, message count, cost."""
        if not self.search_attributes or not workflow.patched(PATCH_SEARCH_ATTRIBUTES):
            return
        model = self.config.model
        values = (
            self._status(),
            f"{model.provider}/{model.id}",
            self.transcript.message_count,
            self.stats.cost_total,
        )
        if values == self._indexed:
            return
        self._indexed = values
        keys = search_attribute_keys()
        workflow.upsert_search_attributes(
            [
                keys[AGENT_STATUS].value_set(values[0]),
                keys[AGENT_MODEL].value_set(values[1]),
                keys[AGENT_MESSAGE_COUNT].value_set(values[2]),
                keys[AGENT_COST_USD].value_set(values[3]),
            ]
        )

    def _set_details(self) -> None:
        model = self.config.model
        lines = [
            f"**{self._status()}** · `{model.provider}/{model.id}` · {self.transcript.message_count} messages "
            f"· ${self.stats.cost_total:.4f}",
        ]
        if self.error_message:
            lines.append(f"error: {self.error_message}")
        if self.steering or self.follow_up:
            lines.append(f"queued: {len(self.steering)} steering, {len(self.follow_up)} follow-up")
        workflow.set_current_details("\n\n".join(lines))
