"""Object-storage credentials for one flow run, from the `storage_block` parameter.

Without a block, s3fs and the scoring processes use the standard AWS chain: environment variables
(AWS_ACCESS_KEY_ID, AWS_ENDPOINT_URL / AWS_ENDPOINT_URL_S3, ...), profiles, instance roles. With a
block, it is read from the Prefect API once per flow run; its settings become the s3fs options of
every filesystem the run opens and environment variables of the scoring subprocess only (see
storage.StorageAccess), never this process's environment, which other flow runs may share.

Two kinds of block hold them: an AwsCredentials block (prefect-aws; read as a block document
through the API, so prefect-aws need not be installed where the flow runs) or a Secret block whose
value is a JSON object with the same field names (AWS_* environment variable names work too).
Messages name the block and its fields, never a value.
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Iterator, Mapping
from typing import Any

from scorekeeper.errors import InputError
from scorekeeper.storage import StorageAccess, use_storage_access
from scorekeeper.tasks.runlog import run_logger

log = logging.getLogger(__name__)

AWS_CREDENTIALS = "aws-credentials"
SECRET = "secret"
BLOCK_TYPES = (AWS_CREDENTIALS, SECRET)

# Our setting -> the field names that may hold it (lower case; AwsCredentials's own names first).
FIELDS: dict[str, tuple[str, ...]] = {
    "access_key_id": ("aws_access_key_id", "access_key_id"),
    "secret_access_key": ("aws_secret_access_key", "secret_access_key"),
    "session_token": ("aws_session_token", "session_token"),
    "profile": ("profile_name", "aws_profile", "profile"),
    "region": ("region_name", "aws_region", "aws_default_region", "region"),
    "endpoint_url": ("endpoint_url", "aws_endpoint_url_s3", "aws_endpoint_url"),
}
# AwsCredentials fields that carry nothing s3fs needs here.
_IGNORED = frozenset({"aws_client_parameters", "block_type_slug", "use_ssl", "verify", "verify_cert_path", "api_version", "config"})


def access_from_fields(fields: Mapping[str, Any], source: str) -> StorageAccess:
    """s3fs options and subprocess environment from a block's fields."""
    flat = {str(k).lower(): v for k, v in fields.items()}
    client_parameters = flat.get("aws_client_parameters")
    if isinstance(client_parameters, Mapping):  # AwsCredentials keeps endpoint_url in here
        flat = {**{str(k).lower(): v for k, v in client_parameters.items()}, **flat}
    settings: dict[str, str] = {}
    for setting, names in FIELDS.items():
        value = next((flat[n] for n in names if flat.get(n) not in (None, "")), None)
        if value is not None:
            if not isinstance(value, str):
                raise InputError(f"storage_block {source}: field for {setting} must be a string")
            settings[setting] = value
    known = {n for names in FIELDS.values() for n in names} | _IGNORED
    unknown = sorted(k for k in flat if k not in known)
    if unknown:
        log.warning("storage_block %s: ignoring unknown fields %s", source, ", ".join(unknown))
    if ("access_key_id" in settings) != ("secret_access_key" in settings):
        raise InputError(f"storage_block {source}: set both aws_access_key_id and aws_secret_access_key, or neither")
    if not settings:
        raise InputError(f"storage_block {source} holds none of: {', '.join(names[0] for names in FIELDS.values())}")
    return StorageAccess(source=source, s3_options=_s3_options(settings), environment=_environment(settings))


def _s3_options(settings: dict[str, str]) -> dict[str, Any]:
    options: dict[str, Any] = {}
    if "access_key_id" in settings:
        options["key"] = settings["access_key_id"]
        options["secret"] = settings["secret_access_key"]
    if "session_token" in settings:
        options["token"] = settings["session_token"]
    if "profile" in settings:
        options["profile"] = settings["profile"]
    client_kwargs = {}
    if "endpoint_url" in settings:
        client_kwargs["endpoint_url"] = settings["endpoint_url"]
    if "region" in settings:
        client_kwargs["region_name"] = settings["region"]
    if client_kwargs:
        options["client_kwargs"] = client_kwargs
    return options


def _environment(settings: dict[str, str]) -> dict[str, str]:
    """The standard AWS variables, so the subprocess's own AWS chain finds the same settings."""
    env: dict[str, str] = {}
    if "access_key_id" in settings:
        env["AWS_ACCESS_KEY_ID"] = settings["access_key_id"]
        env["AWS_SECRET_ACCESS_KEY"] = settings["secret_access_key"]
        # An inherited token belongs to other keys; botocore treats an empty one as none.
        env["AWS_SESSION_TOKEN"] = settings.get("session_token", "")
    if "profile" in settings:
        env["AWS_PROFILE"] = settings["profile"]
    if "region" in settings:
        env["AWS_DEFAULT_REGION"] = env["AWS_REGION"] = settings["region"]
    if "endpoint_url" in settings:
        env["AWS_ENDPOINT_URL_S3"] = settings["endpoint_url"]
    return env


def _candidates(block_name: str) -> tuple[list[str], str]:
    """Block types to look in and the block's own name: 'aws-credentials/x', 'secret/x' or 'x'."""
    slug, sep, name = block_name.partition("/")
    if sep and slug in BLOCK_TYPES:
        return [slug], name
    return list(BLOCK_TYPES), block_name


def _secret_fields(data: Mapping[str, Any], source: str) -> Mapping[str, Any]:
    value = data.get("value")
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            value = None
    if not isinstance(value, Mapping):
        raise InputError(
            f"storage_block {source} must hold a JSON object such as "
            '{"aws_access_key_id": ..., "aws_secret_access_key": ..., "endpoint_url": ...}'
        )
    return value


def load_storage_access(block_name: str) -> StorageAccess:
    """Read an AwsCredentials or Secret block by name from the Prefect API."""
    from prefect.client.orchestration import get_client
    from prefect.exceptions import ObjectNotFound

    slugs, name = _candidates(block_name)
    with get_client(sync_client=True) as client:
        for slug in slugs:
            try:
                document = client.read_block_document_by_name(name, slug, include_secrets=True)
            except ObjectNotFound:
                continue
            source = f"'{slug}/{name}'"
            fields = _secret_fields(document.data, source) if slug == SECRET else document.data
            return access_from_fields(fields, source)
    raise InputError(
        f"storage_block '{block_name}' not found: create an AwsCredentials or a Secret block with "
        "that name (or name it as 'aws-credentials/NAME' or 'secret/NAME')"
    )


@contextlib.contextmanager
def storage_credentials(block_name: str | None) -> Iterator[StorageAccess | None]:
    """Object storage for the enclosed steps: the block's credentials, or the standard AWS chain."""
    if not block_name:
        yield None
        return
    access = load_storage_access(block_name)
    run_logger(__name__).info("object storage: credentials from block %s", access.source)
    with use_storage_access(access):
        yield access


# -- credentials inside URIs: handed to the run out of band -----------------------------------------
# Prefect stores a flow run's parameters verbatim (the UI's Parameters tab shows them), so a URI's
# credentials (a password, a presigned URL's signature) must never be a parameter. The CLI passes
# the redacted URI as the parameter and hands the URI itself to the flow it runs in this process;
# a flow run given a URI with credentials (a deployment run, a direct call) is refused, and one
# given a redacted URI it was not handed (a retry from the UI of a CLI run) is refused too.
_HANDED: dict[str, str] = {}

HOW_TO_PASS = (
    "Prefect would store it as a flow-run parameter. Give the URI without credentials and pass them "
    "out of band: object-storage keys in a storage_block (an AwsCredentials or Secret block) or the "
    "worker's AWS environment; or run `scorekeeper run`, which hands a URI's credentials to its own "
    "flow run and passes only the redacted URI to Prefect"
)


def hand_over_uris(options: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, str]]:
    """The CLI's side: the options with every URI redacted, and the URIs with credentials by field."""
    from scorekeeper.params import URI_FIELDS
    from scorekeeper.redact import has_secret, redact_uri

    handed = {name: options[name] for name in URI_FIELDS if isinstance(options.get(name), str) and has_secret(options[name])}
    return {**options, **{name: redact_uri(uri) for name, uri in handed.items()}}, handed


@contextlib.contextmanager
def handed_uris(uris: Mapping[str, str]) -> Iterator[None]:
    """The URIs (with their credentials) the flow run started inside this block may use."""
    _HANDED.clear()
    _HANDED.update(uris)
    try:
        yield
    finally:
        _HANDED.clear()


def with_handed_uris(request):
    """The flow's side: the request with each redacted URI replaced by the one the CLI handed over.

    Refuses a URI that carries credentials (they are in Prefect already: say how to pass them), and
    a redacted URI that was not handed over; fan-out cannot hand them to other machines."""
    from scorekeeper.params import URI_FIELDS
    from scorekeeper.redact import has_secret, is_redacted, redact_uri

    updates = {}
    for name in URI_FIELDS:
        uri = getattr(request, name)
        if uri is None:
            continue
        if has_secret(uri):
            raise InputError(f"{name} {redact_uri(uri)} carries credentials in the URI: {HOW_TO_PASS}")
        if is_redacted(uri):
            real = _HANDED.get(name)
            if real is None or redact_uri(real) != uri:
                raise InputError(
                    f"{name} {uri} shows *** where a credential was, and this flow run was not handed the URI "
                    f"(a retry or deployment run of a run started with `scorekeeper run`?): {HOW_TO_PASS}"
                )
            updates[name] = real
    if updates and request.fan_out > 1:
        raise InputError(
            f"fan_out {request.fan_out}: the credentials in {', '.join(updates)} cannot be handed to the group "
            "machines; pass them in a storage_block instead"
        )
    return request.model_copy(update=updates) if updates else request
