"""The wire contract: every shape that leaves the process, one place, used by whatever reads or writes it.

- `shapes`: TypedDicts of the events a recorder spills or sends and the records of `reasonlog export`;
  `api`: the bodies of the HTTP API (the routes' response models). `model.check_event` checks events against them,
  `store/transfer_checks.py` checks export records, FastAPI publishes them in /openapi.json.
- `rules`: what an annotation means when a value arrives (`checks_of`), and the constraints types cannot say.
- `codec`: the line encoding of events (spill files and `POST /v1/ingest`).
No I/O here, and nothing from the rest of reasonlog: every layer may import it.
"""
from .api import (
    AnnotationJSON,
    AnnotationsJSON,
    CallDetailJSON,
    CallJSON,
    DiffJSON,
    HealthJSON,
    IngestAnswerJSON,
    IngestLimitsJSON,
    MessageJSON,
    ModelDaysJSON,
    OutcomesJSON,
    ReadyJSON,
    ReasoningRecordsJSON,
    RequestBody,
    RunsJSON,
    SavedRecordJSON,
    SearchHitJSON,
    SearchJSON,
    SessionCallJSON,
    SessionDetailJSON,
    SessionJSON,
    SessionPageJSON,
    SessionsPageJSON,
    SimilarSessionsJSON,
    StatKey,
    StatsJSON,
    WindowJSON,
)
from .codec import NonFinite, check_finite, decode_line, encode_line, jsonable, masked_line, refuse_non_finite
from .shapes import (
    EVENTS,
    EXPORT_VERSION,
    PARSED,
    RECORDS,
    CallRecord,
    CallRecordedJSON,
    ContentRecord,
    ExchangeRecord,
    MessageRecord,
    OutcomeRecord,
    SessionFields,
    SessionRecord,
    SessionStartedJSON,
    ToolResultRecord,
    UsageJSON,
    WireError,
    record_of,
    row_of,
)

__all__ = [
    "AnnotationJSON",
    "AnnotationsJSON",
    "DiffJSON", "HealthJSON", "IngestAnswerJSON", "IngestLimitsJSON", "ModelDaysJSON", "OutcomesJSON", "ReadyJSON",
    "ReasoningRecordsJSON", "RequestBody", "RunsJSON", "SavedRecordJSON", "SearchHitJSON", "SearchJSON",
    "SimilarSessionsJSON", "StatKey", "StatsJSON",
    "EVENTS", "EXPORT_VERSION", "PARSED", "RECORDS", "CallDetailJSON", "CallJSON", "CallRecord", "CallRecordedJSON",
    "ContentRecord", "ExchangeRecord", "MessageJSON", "MessageRecord", "OutcomeRecord", "SessionCallJSON",
    "SessionDetailJSON", "SessionFields", "SessionJSON", "SessionPageJSON", "SessionRecord", "SessionsPageJSON",
    "SessionStartedJSON",
    "ToolResultRecord", "UsageJSON", "WindowJSON", "WireError", "decode_line", "encode_line", "jsonable",
    "NonFinite", "check_finite", "refuse_non_finite",
    "masked_line", "record_of", "row_of",
]
