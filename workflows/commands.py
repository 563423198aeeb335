"""The conversation's commands (updates, signals) and queries, as workflow handlers.

Validators refuse (AGENT_BUSY, INVALID_MESSAGE_ROLE, RATE_LIMITED, VALIDATION_ERROR) before anything
reaches history; handlers only change state, the main loop in ``conversation.py`` does the work.
"""

from __future__ import annotations

from collections.abc import Sequence

from temporalio import workflow
from temporalio.common import RawValue

with workflow.unsafe.imports_passed_through():
    from agentcore import errors
    from agentcore.approvals import STEERED_REASON
    from agentcore.budget import STREAMING_MAX_BYTES, newest_in_answer, oldest_in_answer, shrink_to_fit
    from agentcore.messages import AssistantMessage
    from agentcore.protocol import (
        AbortRequest,
        Accepted,
        ActivityEvents,
        BranchResult,
        ClearQueuesRequest,
        CommandRequest,
        DurableState,
        Idle,
        IdleRequest,
        MessagesPage,
        MessagesQuery,
        PendingRun,
        PromptRequest,
        QueuedMessage,
        QueuesState,
        SetModelRequest,
        SetSystemPromptRequest,
        SetThinkingLevelRequest,
        SetToolsRequest,
    )
    from agentcore.session.entries import (
        SYSTEM_PROMPT_CUSTOM_TYPE,
        ActiveToolsChangeEntry,
        CustomEntry,
        ModelChangeEntry,
        ThinkingLevelChangeEntry,
    )
    from agentcore.session.stats import SessionStats
    from agentcore.tools import is_tool_reference


from .state import ConversationState, _refuse


class CommandHandlers(ConversationState):
    @workflow.update(name="prompt")
    async def prompt(self, request: PromptRequest) -> Accepted:
        return self._accept_prompt(request)

    def _accept_prompt(self, request: PromptRequest) -> Accepted:
        if not self.inbox.first_time(request.id):
            return self._accepted(request.id, duplicate=True)
        self.inbox.count_messages(len(request.messages))
        self.runs.request(PendingRun(id=request.id, kind="prompt", messages=list(request.messages)))
        return self._accepted(request.id)

    @prompt.validator
    def _validate_prompt(self, request: PromptRequest) -> None:
        if self.inbox.seen(request.id):
            return
        self._refuse_if_rolling_over()
        if self.runs.busy:
            raise _refuse(
                errors.AGENT_BUSY, "Agent is already processing a prompt. Use steer() or follow_up()."
            )
        if not request.messages:
            raise _refuse(errors.VALIDATION_ERROR, "messages: a prompt needs at least one message")
        self.inbox.check_rate(len(request.messages))

    @workflow.update(name="continue")
    async def continue_(self, request: CommandRequest) -> Accepted:
        if not self.inbox.first_time(request.id):
            return self._accepted(request.id, duplicate=True)
        self.runs.request(self._continued_run(request.id))
        return self._accepted(request.id)

    def _continued_run(self, request_id: str) -> PendingRun:
        """pi's rule: from an assistant tail, queued steering (else follow-ups) runs as a prompt;
        steering taken as the prompt skips the run's first steering poll (one at a time)."""
        if not isinstance(self.transcript.last_message, AssistantMessage):
            return PendingRun(id=request_id, kind="continue")
        steering = self._take_steering()
        return PendingRun(
            id=request_id,
            kind="prompt",
            messages=steering or self._take_follow_up(),
            skip_initial_steering_poll=bool(steering),
        )

    @continue_.validator
    def _validate_continue(self, request: CommandRequest) -> None:
        if self.inbox.seen(request.id):
            return
        self._refuse_if_rolling_over()
        if self.runs.busy:
            raise _refuse(errors.AGENT_BUSY, "Agent is already processing. Wait for it to finish.")
        last = self.transcript.last_message
        if last is None:
            raise _refuse(errors.INVALID_MESSAGE_ROLE, "No messages to continue from")
        if isinstance(last, AssistantMessage) and self.inbox.queued == (0, 0):
            raise _refuse(errors.INVALID_MESSAGE_ROLE, "Cannot continue from message role: assistant")
        # A run adds at least its answer: refused when the conversation (with what is queued) is full
        # or the minute's messages are spent.
        self.inbox.check_rate(1)

    @workflow.update(name="reset")
    async def reset(self, request: CommandRequest) -> Accepted:
        if self.inbox.first_time(request.id):
            self.transcript.reset()
            # A new root: the settings the conversation keeps go on it, so the file alone rebuilds it.
            self._record_settings_off_path(BranchResult())
            self.inbox.clear()
            self.runs.note_error(None)
            # Stats keep counting: they are the session file's, which keeps every entry (SessionStats).
            self._cancel_all_wakeups("reset")
            await self._delete_all_schedules()
            self._set_details()
        return Accepted(id=request.id, message_count=0)

    @reset.validator
    def _validate_reset(self, request: CommandRequest) -> None:
        if not self.inbox.seen(request.id) and self.runs.busy:
            raise _refuse(errors.AGENT_BUSY, "Cannot reset while the agent is running; abort it first.")

    @workflow.update(name="set_model")
    async def set_model(self, request: SetModelRequest) -> Accepted:
        if self.config.model != request.model:
            self.config.model = request.model
            self.transcript.add(ModelChangeEntry(model=request.model))
            self._set_details()
        return self._accepted(request.id)

    @set_model.validator
    def _validate_set_model(self, request: SetModelRequest) -> None:
        self._refuse_if_busy("set_model")

    @workflow.update(name="set_thinking_level")
    async def set_thinking_level(self, request: SetThinkingLevelRequest) -> Accepted:
        if self.config.thinking_level != request.thinking_level:
            self.config.thinking_level = request.thinking_level
            self.transcript.add(ThinkingLevelChangeEntry(thinking_level=request.thinking_level))
        return self._accepted(request.id)

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
        return self._accepted(request.id)

    @set_tools.validator
    def _validate_set_tools(self, request: SetToolsRequest) -> None:
        self._refuse_if_busy("set_tools")
        bad = [name for name in request.tools if not is_tool_reference(name)]
        if bad:
            raise _refuse(errors.VALIDATION_ERROR, f"tools: invalid tool name(s) {bad}")

    @workflow.update(name="set_system_prompt")
    async def set_system_prompt(self, request: SetSystemPromptRequest) -> Accepted:
        if self.config.system_prompt != request.system_prompt:
            self.config.system_prompt = request.system_prompt
            self.transcript.add(
                CustomEntry(custom_type=SYSTEM_PROMPT_CUSTOM_TYPE, data=request.system_prompt)
            )
        return self._accepted(request.id)

    @set_system_prompt.validator
    def _validate_set_system_prompt(self, request: SetSystemPromptRequest) -> None:
        self._refuse_if_busy("set_system_prompt")

    @workflow.update(name="prompt_and_wait")
    async def prompt_and_wait(self, request: PromptRequest) -> Idle:
        """``prompt``, answered when the run it starts has ended (``DurableAgent.run``): the run's
        messages, its answer last. The entries it made are in this workflow's history then, and in
        the session file within ``FLUSH_DELAY`` or with the next run, as for a turn read by its
        events (``wait_for_idle`` waits for the file too): waiting for the write would cost every
        such turn one more activity or workflow task."""
        since = self.inbox.waiting_since(request.id)
        if since is None:  # (else sent again after the run before this one continued as new)
            accepted = self._accept_prompt(request)
            if accepted.status == "duplicate":
                return Idle(id=request.id, status="duplicate", message_count=accepted.message_count)
            since = accepted.message_count
            self.inbox.wait_for_run(request.id, since)
        idle = await self._until_idle(request.id, since, written=False)
        self.inbox.done_waiting(request.id)
        return idle

    @prompt_and_wait.validator
    def _validate_prompt_and_wait(self, request: PromptRequest) -> None:
        self._validate_prompt(request)

    @workflow.update(name="wait_for_idle")
    async def wait_for_idle(self, request: IdleRequest) -> Idle:
        return await self._until_idle(request.id, request.since, written=True)

    async def _until_idle(self, request_id: str, since: int | None, *, written: bool) -> Idle:
        """Wait until no run is active (and, if ``written``, every entry is in the session file).

        A conversation continuing as new first lets every handler finish: a wait still going on
        then (a run waiting for a person's approval) is refused as ``ROLLING_OVER``, and the client
        sends it again, to the next run, where it goes on."""

        def ready() -> bool:
            return (
                self.runs.initialized
                and not self.runs.busy
                and (not written or not self.transcript.unwritten or self.session.blocked)
            )

        # Entries waiting for the next run are written now, while someone waits for them.
        if written:
            self.session.waiter_came()
        try:
            await workflow.wait_condition(
                lambda: ready() or self.session.import_error is not None or self.runs.rolling_over
            )
        finally:
            if written:
                self.session.waiter_left()
        if (error := self.session.import_error) is not None:
            self.inbox.done_waiting(request_id)
            raise _refuse(error.type or errors.SESSION_ERROR, error.message)
        if not ready():
            self._refuse_if_rolling_over()
        if written and self.transcript.unwritten:
            # The entries are kept; the next run tries again. Waiting would never end meanwhile.
            raise _refuse(
                errors.SESSION_ERROR, self.runs.error_message or "the session file cannot be written"
            )
        idle = Idle(id=request_id, message_count=self.transcript.message_count)
        if since is not None:
            # What a client that waited for the run's end reads next, without a query.
            page = self.get_messages(MessagesQuery(start=since))
            idle.messages, idle.start = page.messages, page.start
        return idle

    @workflow.update(name="queue_steering")
    async def queue_steering(self, item: QueuedMessage) -> Accepted:
        self._queue_steering(item)
        return self._accepted(item.id)

    @queue_steering.validator
    def _validate_queue_steering(self, item: QueuedMessage) -> None:
        if not self.inbox.seen(item.id):
            self.inbox.check_rate(1)

    @workflow.update(name="queue_follow_up")
    async def queue_follow_up(self, item: QueuedMessage) -> Accepted:
        self._queue_follow_up(item)
        return self._accepted(item.id)

    @queue_follow_up.validator
    def _validate_queue_follow_up(self, item: QueuedMessage) -> None:
        if not self.inbox.seen(item.id):
            self.inbox.check_rate(1)

    # The signals came first (clients send the updates above now); kept for the histories that
    # recorded them, and for whoever signals by hand (the Temporal Web UI, `temporal workflow
    # signal`). A signal cannot be refused: one past the limits is dropped, with a warning in the
    # worker's log, and nothing is queued.
    @workflow.signal(name="steer")
    def steer(self, item: QueuedMessage) -> None:
        if self._within_limits(item, "steer"):
            self._queue_steering(item)

    @workflow.signal(name="follow_up")
    def follow_up_(self, item: QueuedMessage) -> None:
        if self._within_limits(item, "follow_up"):
            self._queue_follow_up(item)

    def _within_limits(self, item: QueuedMessage, signal: str) -> bool:
        if self.inbox.seen(item.id):
            return True  # applied already: queuing it again is a no-op
        refusal = self.inbox.refusal(1)
        if refusal is not None:
            workflow.logger.warning("%s signal dropped (%s): %s", signal, errors.RATE_LIMITED, refusal)
        return refusal is None

    def _queue_steering(self, item: QueuedMessage) -> None:
        if self.inbox.queue_steering(item):
            # Calls waiting for approval are denied: the user said something else instead.
            self.approvals.deny_all(STEERED_REASON)

    def _queue_follow_up(self, item: QueuedMessage) -> None:
        self.inbox.queue_follow_up(item)

    @workflow.update(name="clear_queues")
    async def clear_queues(self, request: ClearQueuesRequest) -> QueuesState:
        """Empty the steering and/or follow-up queue; returns what it removed (pi's
        ``clearSteeringQueue`` / ``clearFollowUpQueue`` / ``clearAllQueues``). A queued message
        reaches the session file only when a run takes it, so nothing is written or recorded."""
        if not self.inbox.first_time(request.id):
            return QueuesState()  # applied already: a resent clear must not empty what came since
        removed = self.inbox.clear(request.queue)
        self._set_details()
        return removed

    @workflow.signal(name="abort")
    def abort(self, request: AbortRequest) -> None:
        if self.runs.abort(request.reason or "aborted by user"):
            self._set_details()

    @workflow.signal(name="activity_events")
    def activity_events(self, batch: ActivityEvents) -> None:
        self._add_activity_events(batch)

    @workflow.update(dynamic=True)
    def unknown_update(self, name: str, args: Sequence[RawValue]) -> None:
        self._validate_unknown_update(name, args)  # never reached: the validator refuses every one

    @unknown_update.validator
    def _validate_unknown_update(self, name: str, args: Sequence[RawValue]) -> None:
        # Refused here, not by the SDK: the refusal is one the task guard sees (``task_guard.py``).
        raise _refuse(errors.VALIDATION_ERROR, f"no update named {name!r}")

    @workflow.query(name="get_state")
    def get_state(self) -> DurableState:
        # The newest messages within the answer's budget (all of them, unless tool output is large):
        # ``first_message_index`` says where they start; ``get_messages`` pages through the rest.
        skipped, messages = newest_in_answer(self.transcript.messages)
        return DurableState(
            session_id=self.session_id,
            system_prompt=self.config.system_prompt,
            model=self.config.model,
            thinking_level=self.config.thinking_level,
            tools=self.config.tools,
            messages=messages,
            first_message_index=self.transcript.first_message_index + skipped,
            message_count=self.transcript.message_count,
            is_streaming=self.runs.running,
            streaming_message=self._streaming_partial(),
            pending_tool_calls=sorted(self.runs.tool_calls),
            error_message=self.runs.error_message,
            status=self._status(),
            pending_approvals=self.approvals.pending(),
            steering_queue_length=self.inbox.queued[0],
            follow_up_queue_length=self.inbox.queued[1],
            event_offset=self.event_log.offset,
            leaf_id=self.transcript.leaf_id,
            wakeups=self.wakeups.pending,
            schedules=list(self.schedules),
            retries=self.streaming.retries,
        )

    def _streaming_partial(self) -> AssistantMessage | None:
        """The message being streamed, rebuilt from the deltas its model activity published (queries
        only: the deltas are folded here, on demand, so streaming costs the workflow nothing)."""
        streaming = self.streaming.message
        if streaming is None:
            return None
        partial = self.streaming.partial() or streaming
        # Within the answer's budget beside the messages (a long answer streams for a while).
        return shrink_to_fit(partial, STREAMING_MAX_BYTES)

    @workflow.query(name="get_messages")
    def get_messages(self, query: MessagesQuery) -> MessagesPage:
        first = self.transcript.first_message_index
        start = max(query.start, first)
        end = (
            self.transcript.message_count
            if query.end is None
            else min(query.end, self.transcript.message_count)
        )
        # As many as the answer's budget holds, from ``start`` on (at least one): page on from
        # ``start + len(messages)``.
        messages = oldest_in_answer(self.transcript.messages[start - first : max(start, end) - first])
        return MessagesPage(
            messages=messages,
            start=start,
            total=self.transcript.message_count,
            entry_ids=self.transcript.entry_ids[start - first : start - first + len(messages)],
        )

    @workflow.query(name="get_session_stats")
    def get_session_stats(self) -> SessionStats:
        return self.stats

    @workflow.query(name="get_queues")
    def get_queues(self) -> QueuesState:
        return QueuesState(steering=self.inbox.steering, follow_up=self.inbox.follow_up)
