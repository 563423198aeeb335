"""Connecting to Temporal: where (``temporalio.envconfig``: the ``TEMPORAL_*`` variables and the
``temporal`` CLI's profile file, overridden by explicit settings) and with the converter agentcore's
payloads need."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any, ClassVar

from temporalio.client import Client, KeepAliveConfig
from temporalio.contrib.pydantic import PydanticPayloadConverter
from temporalio.converter import CompositePayloadConverter, DataConverter, SerializationContext
from temporalio.envconfig import ClientConfigProfile, ClientConfigTLS

from .codec import EncryptedPayloadConverter
from .payloads import with_payload_store


class AgentcorePayloadConverter(PydanticPayloadConverter):
    """Temporal's pydantic payload converter, built once per process.

    The SDK makes a new data converter, and with it a new payload converter, for every workflow
    activation and every workflow run: a fresh composite of encoders and an empty cache of pydantic
    ``TypeAdapter``s each time (6 % of a worker's CPU on a tool turn, and every run rebuilt the
    adapters of the types it decodes). The converter is stateless apart from that cache, which is
    thread-safe, so every construction hands back the one shared instance. Payloads are byte for
    byte those of ``temporalio.contrib.pydantic.pydantic_data_converter``.
    """

    _shared: ClassVar[AgentcorePayloadConverter | None] = None

    def __new__(cls) -> AgentcorePayloadConverter:
        shared = cls.__dict__.get("_shared")
        if shared is None:
            shared = super().__new__(cls)
            PydanticPayloadConverter.__init__(shared)
            # Last: it encodes nothing; it only names a missing key when a payload is encrypted.
            CompositePayloadConverter.__init__(
                shared, *shared.converters.values(), EncryptedPayloadConverter()
            )
            cls._shared = shared
        return shared

    def __init__(self) -> None:
        pass  # built once, in __new__

    def with_context(self, context: SerializationContext) -> AgentcorePayloadConverter:
        # None of its encoders reads the context; cloning would hand out the shared instance anyway.
        return self


# Every payload (workflow input, activity results, events) is a pydantic model.
DATA_CONVERTER = DataConverter(payload_converter_class=AgentcorePayloadConverter)


def default_data_converter() -> DataConverter:
    """``DATA_CONVERTER``, with payload encryption when ``AGENTCORE_ENCRYPTION_KEY`` is set."""
    from .codec import codec_from_env, with_codec

    return with_codec(DATA_CONVERTER, codec_from_env())


DEFAULT_ADDRESS = "localhost:7233"
DEFAULT_NAMESPACE = "default"

# A connection whose path goes dead without a reset (a blackhole: packets dropped both ways) is found
# out by its HTTP/2 keepalive: a ping once nothing has come from the server for 10 s, the connection
# given up when the ping is not answered within 5 s. Left on it, a worker waits for TCP to send again,
# and TCP backs off: after a 20 s cut the next try came 6.5 s after the path returned
# (docs/network-faults.md). The ping interval cannot be shorter: Temporal's frontend wants pings at
# least 10 s apart (``frontend.keepAliveMinTime``) and drops a connection that pings more often.
# Pings go only over a connection that has been silent, so they cost nothing while it works. Each
# attempt at a new connection gets 3 s (its SYN sent twice): a cut longer than that keeps trying
# afresh rather than waiting out SYN retransmissions that back off to 32 s apart. ``connect``'s
# ``keep_alive_config=`` and ``connect_timeout=`` set others (``None``: none, the SDK's defaults are
# 30 s / 15 s and none).
DEFAULT_KEEP_ALIVE = KeepAliveConfig(interval_millis=10_000, timeout_millis=5_000)
DEFAULT_CONNECT_TIMEOUT = timedelta(seconds=3)


class TemporalConfigError(ValueError):
    """The connection settings cannot be used: a profile file that does not parse, a certificate that
    cannot be read, a profile that does not exist. The message is one line naming the cause."""


@dataclass(frozen=True)
class ConnectionSettings:
    """Explicit connection settings (the CLI's flags). Each one set overrides what
    ``temporalio.envconfig`` found; each one left ``None`` keeps it.

    ``tls_ca_cert``, ``tls_cert`` and ``tls_key`` are file paths (PEM). ``tls=False`` turns TLS off
    even where an API key would turn it on; ``tls=True`` turns it on with the system's roots."""

    address: str | None = None
    namespace: str | None = None
    api_key: str | None = None
    tls: bool | None = None
    tls_ca_cert: str | None = None
    tls_cert: str | None = None
    tls_key: str | None = None
    tls_server_name: str | None = None
    profile: str | None = None
    config_file: str | None = None
    # gRPC metadata (headers) sent with every call, over the profile's (``--grpc-meta KEY=VALUE``).
    grpc_meta: tuple[tuple[str, str], ...] = ()


def load_connect_config(settings: ConnectionSettings | None = None) -> dict[str, Any]:
    """``Client.connect`` keyword arguments: ``settings`` over the environment over the profile file.

    The environment and file are those of every Temporal tool (``temporalio.envconfig``):
    ``TEMPORAL_ADDRESS``, ``TEMPORAL_NAMESPACE``, ``TEMPORAL_API_KEY``, ``TEMPORAL_TLS``,
    ``TEMPORAL_TLS_SERVER_CA_CERT_PATH``, ``TEMPORAL_TLS_CLIENT_CERT_PATH``,
    ``TEMPORAL_TLS_CLIENT_KEY_PATH``, ``TEMPORAL_TLS_SERVER_NAME``, ``TEMPORAL_GRPC_META_*``, and the
    TOML file of the ``temporal`` CLI (``TEMPORAL_CONFIG_FILE``, default
    ``~/.config/temporalio/temporal.toml``), profile ``TEMPORAL_PROFILE`` (default ``default``).
    Unset everywhere: ``localhost:7233``, namespace ``default``, no TLS.
    """
    settings = settings or ConnectionSettings()
    config_file = settings.config_file
    if config_file is not None and not Path(config_file).is_file():
        raise TemporalConfigError(f"no Temporal config file at {config_file}")
    try:
        profile = ClientConfigProfile.load(
            settings.profile, config_source=Path(config_file) if config_file else None
        )
    except (RuntimeError, ValueError, OSError) as err:
        raise TemporalConfigError(
            f"cannot load the Temporal connection profile: {_first_line(err)}"
        ) from None
    profile = _overridden(profile, settings)
    try:
        config: dict[str, Any] = dict(profile.to_client_connect_config())
    except OSError as err:  # a certificate path that cannot be read
        raise TemporalConfigError(f"cannot read a TLS file: {err.filename}: {err.strerror}") from None
    config.setdefault("target_host", DEFAULT_ADDRESS)
    config.setdefault("namespace", DEFAULT_NAMESPACE)
    return config


def _overridden(profile: ClientConfigProfile, settings: ConnectionSettings) -> ClientConfigProfile:
    tls = profile.tls
    tls_fields: dict[str, Any] = {}
    if settings.tls is not None:
        tls_fields["disabled"] = not settings.tls
    for name, path in (
        ("server_root_ca_cert", settings.tls_ca_cert),
        ("client_cert", settings.tls_cert),
        ("client_private_key", settings.tls_key),
    ):
        if path is not None:
            tls_fields[name] = Path(path)
            tls_fields.setdefault("disabled", False)
    if settings.tls_server_name is not None:
        tls_fields["server_name"] = settings.tls_server_name
    if tls_fields:
        tls = dataclasses.replace(tls or ClientConfigTLS(), **tls_fields)
    return dataclasses.replace(
        profile,
        address=settings.address or profile.address,
        namespace=settings.namespace or profile.namespace,
        api_key=settings.api_key or profile.api_key,
        tls=tls,
        grpc_meta={**profile.grpc_meta, **dict(settings.grpc_meta)},
    )


def _first_line(err: BaseException) -> str:
    return str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__


async def connect(
    address: str | None = None,
    *,
    namespace: str | None = None,
    settings: ConnectionSettings | None = None,
    **kwargs: Any,
) -> Client:
    """A client for the cluster ``temporalio.envconfig`` describes (see ``load_connect_config``),
    with ``address`` / ``namespace`` / ``settings`` overriding it and ``kwargs`` passed to
    ``Client.connect`` as they are (``runtime=`` for a worker's metrics, say).

    Temporal Core's own log lines go through Python logging (``agentcore.temporal.telemetry``)
    unless ``runtime`` is given. A connection gone dead is given up within 15 s (``DEFAULT_KEEP_ALIVE``)
    and a new one tried every 3 s (``DEFAULT_CONNECT_TIMEOUT``). Payloads go through agentcore's
    pydantic converter, encrypted when ``AGENTCORE_ENCRYPTION_KEY`` is set (see
    ``agentcore.temporal.codec``). With OpenTelemetry configured (``OTEL_*``, see
    ``agentcore.temporal.tracing``) the client traces its calls, and workers made from it theirs, unless
    ``interceptors`` or ``plugins`` bring Temporal's own tracing (``OpenTelemetryPlugin``, say)."""
    from .tracing import has_tracing_interceptor, tracing_interceptor

    settings = settings or ConnectionSettings()
    if address or namespace:
        settings = dataclasses.replace(
            settings, address=address or settings.address, namespace=namespace or settings.namespace
        )
    config = load_connect_config(settings)
    config.update(kwargs)
    config.setdefault("keep_alive_config", DEFAULT_KEEP_ALIVE)
    config.setdefault("connect_timeout", DEFAULT_CONNECT_TIMEOUT)
    if "runtime" not in config:
        from .telemetry import default_runtime

        config["runtime"] = default_runtime()  # Core's log lines through Python logging
    if "data_converter" not in config:
        config["data_converter"] = default_data_converter()
    interceptor = tracing_interceptor()
    if interceptor is not None and not has_tracing_interceptor(
        config.get("interceptors", ()), config.get("plugins", ())
    ):
        config["interceptors"] = [*config.get("interceptors", ()), interceptor]
    return await Client.connect(**config)


def ensure_data_converter(client: Client, payloads_dir: str | Path | None = None) -> Client:
    """The same connection with the pydantic converter (a client made without it cannot decode us),
    storing large payloads in ``payloads_dir`` when given (see ``agentcore.temporal.payloads``)."""
    converter = client.data_converter
    if converter.payload_converter_class is not DATA_CONVERTER.payload_converter_class:
        # Keep the client's codec (encryption) and storage: only the payload converter is swapped.
        converter = dataclasses.replace(
            DATA_CONVERTER, payload_codec=converter.payload_codec, external_storage=converter.external_storage
        )
    converter = with_payload_store(converter, payloads_dir)
    if converter is client.data_converter:
        return client
    config = client.config()
    config["data_converter"] = converter
    return Client(**config)
