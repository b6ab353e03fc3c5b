"""Schemathesis hooks of .ci/contract.

`positive_data_acceptance_by_rule` replaces schemathesis' `positive_data_acceptance` check: a
request that the OpenAPI document says is valid must be accepted, and a 422 is accepted only when
every key of its `errors` map names a rule the document cannot state because it depends on what
the server holds (an unknown or foreign id, a duplicate title, number or name, a balance, the key
making the request, an Idempotency-Key used before), or on the server's own lists and settings
(time zone names, private webhook addresses), or compares two fields of one body (JSON Schema
has no keyword for "after that other field"). Every such rule is listed below with its message,
so a 422 for anything else (a format, a pattern, a length, an enum, a bound the document could
have said) fails the run. docs/api.md ("The OpenAPI document and contract fuzzing") explains it.
"""

import json
import os
import re
import urllib.request

import schemathesis
from schemathesis.core.failures import Failure, Severity

# (error key, message) patterns of the rules the document cannot state.
DATA_RULES = [
    # An id in a body naming no record of the caller's company (decisions §2).
    (r"shop_id", r"^The selected shop_id is invalid\.$"),
    (r"shop_ids\.\d+", r"^The selected shop is invalid\.$"),
    (r"customer_id", r"^The selected customer_id is invalid\.$"),
    # A bay title the appointment's shop does not have (or no active bay of that title).
    (r"column", r"^The column field must name a bay of"),
    (r"column", r"^The column must be the title of an active bay of the shop\.$"),
    # A hold that does not exist, or whose shop, time or bay the booking contradicts.
    (r"hold_id", r"^The selected hold_id is invalid\.$"),
    (r"shop_id|date|hours|column", r"^The \w+ must equal the hold's"),
    # A hold's start in the past (depends on the clock).
    (r"date", r"^The date field must not be in the past\.$"),
    # Uniqueness among stored records (bay titles, source names, ship-to and customer numbers).
    (r"title|name|number|customer_number", r"^The \w+ has already been taken\.$"),
    # A bay that has appointments stays in its shop.
    (r"shop_id", r"^This bay has appointments"),
    # A payment above the entry's balance.
    (r"amount", r"balance"),
    # The key revoking itself.
    (r"id", r"^A key cannot revoke itself"),
    # The same Idempotency-Key with another request.
    (r"Idempotency-Key", r""),
    # At most 50 webhooks per company.
    (r"url", r"^A company may have at most"),
    # Private, loopback and internal webhook addresses, unless the server allows them.
    (r"url", r"private, loopback, link-local or internal address"),
    # Comparisons between two fields of the body.
    (r"hours\.\d+\.close", r"^The closing time must be after the opening time\.$"),
    (r"hours\.\d+", r"^This interval overlaps another interval of the same day\.$"),
    (r"due_date", r"^The due_date field must be a date after or equal to date\.$"),
    (r"end_date", r"^The end_date must not be before the start_date\.$"),
    (r"end_date", r"^The range may span at most \d+ dates\.$"),
    (r"terms", r"^The terms and customer_pay_type fields are the same value and must match\.$"),
    # An import's file: to JSON Schema it is bytes; its CSV header and rows are checked like
    # creates (decisions §16), row by row.
    (r"file|header|rows|row \d+\..+", r""),
]


_zones = None


def _zone_names():
    """The time zone names the server lists (GET /api/v1/settings/timezones), fetched once from
    the server .ci/contract started (CONTRACT_BASE_URL, CONTRACT_API_KEY)."""
    global _zones
    if _zones is None:
        request = urllib.request.Request(
            os.environ["CONTRACT_BASE_URL"].rstrip("/") + "/api/v1/settings/timezones",
            headers={"Authorization": "Bearer " + os.environ["CONTRACT_API_KEY"]},
        )
        with urllib.request.urlopen(request, timeout=10) as response:
            _zones = set(json.load(response)["data"])
    return _zones


def _is_data_rule(case, key, messages):
    if key == "timezone":
        # A string the server's zone list does not hold; a listed name must be accepted.
        zone = case.body.get("timezone") if isinstance(case.body, dict) else None
        return isinstance(zone, str) and zone not in _zone_names()
    return all(
        any(re.fullmatch(k, key) and re.search(m, message) for k, m in DATA_RULES) for message in messages
    )


class RejectedForStatedRule(Failure):
    def __init__(self, *, operation, status, errors):
        super().__init__(
            operation=operation,
            title="Schema-valid request refused",
            message=(
                f"Valid data should have been accepted (got {status}). A 422 is expected only for rules that depend "
                f"on stored data; these should be stated in the document:\n{json.dumps(errors, indent=2)}"
            ),
            severity=Severity.MEDIUM,
        )


# 404 (an id that names nothing), 409 (a cancelled appointment, a running Idempotency-Key), 412
# and 304 (an If-Match or If-None-Match against the current ETag) depend on stored data too.
ACCEPTED = {304, 401, 403, 404, 409, 412, 429}


@schemathesis.check
def positive_data_acceptance_by_rule(ctx, response, case):
    meta = case.meta
    if meta is None or not meta.generation.mode.is_positive:
        return None
    # A case can be "positive" overall with one part (a header, say) made invalid on purpose.
    if any(not component.mode.is_positive for component in (meta.components or {}).values()):
        return None
    status = response.status_code
    if 200 <= status < 300 or status in ACCEPTED:
        return None
    errors = {}
    if status == 422:
        try:
            errors = response.json().get("errors") or {}
        except ValueError:
            errors = {}
        if errors and all(_is_data_rule(case, key, messages) for key, messages in errors.items()):
            return None
    raise RejectedForStatedRule(operation=case.operation.label, status=status, errors=errors or response.text[:500])
