#!/usr/bin/env python3
"""Checks Home Assistant MQTT discovery payloads with Home Assistant's own code.

    check_discovery.py FILE [--prefix PREFIX]

FILE is JSON: a list of {"topic": ..., "payload": ...}, each a retained
discovery message as published; the payload is the message's JSON text (a
string, exactly the bytes sent) or the JSON object itself. PREFIX is Home
Assistant's discovery prefix (its default, "homeassistant", unless given).

Each message goes the way homeassistant.components.mqtt.discovery's
async_discovery_message_received takes it: the topic through TOPIC_MATCHER,
a device payload through _parse_device_payload (abbreviations expanded by
_replace_all_abbreviations, then DEVICE_DISCOVERY_SCHEMA), each component
split off with its platform popped, the device, the origin and the shared
options merged in (_merge_common_device_options), `~` replaced, and then,
as async_setup_entity_entry_helper does when the platform receives it,
validated by that platform's DISCOVERY_SCHEMA. Reported, naming the message
and the component:
  - every warning or error HA's discovery code logs, and every schema error;
  - every key of a component that its platform's schema drops (the schemas
    are REMOVE_EXTRA: a key HA does not know, likely a misspelt one, would
    vanish without a word);
  - a JSON key twice in one object, a unique_id twice in the file, a device
    or component id twice.
Exits 1 when anything was reported, 2 on a bad FILE, 0 otherwise.

Runs in a venv with homeassistant installed (scripts/install-deps.sh makes
it); it needs no running Home Assistant.
"""

import argparse
import asyncio
import importlib
import json
import logging
import sys
import tempfile
import types

# Stub, the only one: Home Assistant's cloud client. homeassistant.helpers.network
# and components.http import hass_nabucasa.remote at import time, and use it
# only while serving a request; installing it would bring boto3 and a dozen
# more packages that no discovery or schema code touches.
_nabucasa = types.ModuleType("hass_nabucasa")
_nabucasa.remote = types.ModuleType("hass_nabucasa.remote")
sys.modules.setdefault("hass_nabucasa", _nabucasa)
sys.modules.setdefault("hass_nabucasa.remote", _nabucasa.remote)

import voluptuous as vol  # noqa: E402

from homeassistant.components.mqtt import discovery  # noqa: E402
from homeassistant.components.mqtt.const import (  # noqa: E402
    CONF_COMPONENTS,
    CONF_ORIGIN,
    DEFAULT_PREFIX,
)
from homeassistant.const import CONF_DEVICE, CONF_PLATFORM, CONF_UNIQUE_ID  # noqa: E402
from homeassistant.core import HomeAssistant  # noqa: E402


class Problems:
    def __init__(self):
        self.lines = []

    def add(self, where, what):
        self.lines.append(f"{where}: {what}")


class LogCapture(logging.Handler):
    """What HA's discovery code logs at WARNING or above: each is a message
    or component HA refused or changed."""

    def __init__(self):
        super().__init__(logging.WARNING)
        self.records = []

    def emit(self, record):
        self.records.append(record.getMessage())

    def take(self):
        out, self.records = self.records, []
        return out


def no_duplicate_keys(where, problems):
    def hook(pairs):
        seen = set()
        for key, _ in pairs:
            if key in seen:
                problems.add(where, f"the key {key!r} is twice in one JSON object")
            seen.add(key)
        return dict(pairs)

    return hook


def check_message(index, message, prefix, problems, log, unique_ids, devices):
    topic = message.get("topic")
    where = f"message {index} ({topic})"
    if not isinstance(topic, str):
        problems.add(where, "no topic")
        return
    raw = message.get("payload")
    if isinstance(raw, str):
        json.loads(raw, object_pairs_hook=no_duplicate_keys(where, problems))
        text = raw
    else:
        text = json.dumps(raw)

    # async_discovery_message_received: the topic.
    trimmed = topic.replace(f"{prefix}/", "", 1)
    match = discovery.TOPIC_MATCHER.match(trimmed)
    if trimmed == topic or not match:
        problems.add(where, f"not a discovery topic under {prefix!r}")
        return
    component, node_id, object_id = match.groups()
    if component != CONF_DEVICE:
        problems.add(where, f"a {component!r} discovery topic; boardd publishes device-based discovery")
        return
    device_id = f"{node_id} {object_id}" if node_id else object_id
    if device_id in devices:
        problems.add(where, f"the device id {device_id!r} is also {devices[device_id]}'s")
    devices[device_id] = where

    # _parse_device_payload: JSON, abbreviations, DEVICE_DISCOVERY_SCHEMA
    # (it logs and returns {} on an invalid payload; the payload it returns
    # is the expanded one, not the schema's result).
    payload = discovery._parse_device_payload(None, text, object_id, node_id)
    for line in log.take():
        problems.add(where, line)
    if not payload:
        problems.add(where, "Home Assistant discards the whole device payload")
        return

    device_config = payload[CONF_DEVICE]
    origin_config = payload.get(CONF_ORIGIN)
    for component_id, config in payload[CONF_COMPONENTS].items():
        cwhere = f"{where} component {component_id!r}"
        platform = config.pop(CONF_PLATFORM)
        # As async_discovery_message_received: a component with nothing but
        # its platform removes what was discovered under its id; the rest get
        # the device, the origin and the shared options.
        component_payload = discovery.MQTTDiscoveryPayload(config)
        if not component_payload:
            continue
        component_payload[CONF_DEVICE] = device_config
        component_payload[CONF_ORIGIN] = origin_config
        discovery._merge_common_device_options(component_payload, payload)
        if discovery.TOPIC_BASE in component_payload:
            discovery._replace_topic_base(component_payload)

        uid = component_payload.get(CONF_UNIQUE_ID)
        if uid is not None:
            if uid in unique_ids:
                problems.add(cwhere, f"the unique_id {uid!r} is also {unique_ids[uid]}'s")
            unique_ids[uid] = cwhere

        # async_setup_entity_entry_helper: the platform's DISCOVERY_SCHEMA.
        try:
            module = importlib.import_module(f"homeassistant.components.mqtt.{platform}")
            schema = module.DISCOVERY_SCHEMA
        except (ImportError, AttributeError) as exc:
            problems.add(cwhere, f"no MQTT platform {platform!r} with a discovery schema ({exc})")
            continue
        given = dict(component_payload)
        try:
            validated = schema(component_payload)
        except vol.Invalid as exc:
            problems.add(cwhere, f"{platform}: Home Assistant rejects it: {exc}")
            continue
        finally:
            for line in log.take():
                problems.add(cwhere, line)
        for key in sorted(set(given) - set(validated)):
            problems.add(cwhere, f"{platform}: Home Assistant drops the key {key!r} (unknown to it: misspelt?)")


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("file")
    parser.add_argument("--prefix", default=DEFAULT_PREFIX)
    args = parser.parse_args(argv)

    problems = Problems()
    try:
        with open(args.file, encoding="utf-8") as f:
            messages = json.load(f, object_pairs_hook=no_duplicate_keys(args.file, problems))
    except (OSError, ValueError) as exc:
        print(f"{args.file}: {exc}", file=sys.stderr)
        return 2
    if not isinstance(messages, list) or not messages:
        print(f"{args.file}: not a non-empty list of messages", file=sys.stderr)
        return 2

    # The one runtime bit HA's schemas need: a HomeAssistant object, made
    # (never started) inside a running event loop as in HA, so cv.template
    # compiles each template the way a running HA does. Nothing else of HA
    # runs: no config entry, no broker, no entity is set up.
    with tempfile.TemporaryDirectory() as config_dir:
        return asyncio.run(check_all(args, messages, problems, config_dir))


async def check_all(args, messages, problems, config_dir):
    hass = HomeAssistant(config_dir)
    log = LogCapture()
    logging.getLogger("homeassistant").addHandler(log)
    logging.getLogger("homeassistant").setLevel(logging.WARNING)
    unique_ids, devices = {}, {}
    for index, message in enumerate(messages):
        if not isinstance(message, dict):
            problems.add(f"message {index}", "not an object")
            continue
        check_message(index, message, args.prefix, problems, log, unique_ids, devices)
    for line in problems.lines:
        print(line)
    if problems.lines:
        print(f"{len(problems.lines)} problem(s) in {len(messages)} discovery message(s)")
        status = 1
    else:
        print(f"ok: {len(messages)} discovery message(s), {len(unique_ids)} entities, as Home Assistant reads them")
        status = 0
    await hass.async_stop(force=True)
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
