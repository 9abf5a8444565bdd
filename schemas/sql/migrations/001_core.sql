-- The stored form of a RAG request. `spans` keeps what was received, so the derived rows
-- (requests, chunks, placements) can be rebuilt by a newer normalizer; `outcomes` keeps
-- every grade ever sent and `request_outcomes` (a view) merges them.

{% if engine == "clickhouse" -%}
-- ClickHouse: the same tables, NOT NULL columns plain and the others Nullable. An array is
-- never NULL there: an unset list is empty, and where an empty list is a value of its own (an
-- outcome's lists) a column <list>_set says whether it was sent.
--
-- Many writers share one ClickHouse (docs/architecture.md, "Two engines", "The write path on
-- ClickHouse"): every derivation of a trace is inserted as a new version, never updated in
-- place. The rows derived from a trace are kept in <name>_versions tables, each row carrying
-- its derivation's `version`; `derivations` records each derivation once all of its rows are
-- in, and the names the views read (requests, chunks, placements, answer_sources, outcomes)
-- are views showing only the rows of each trace's newest derivation (queries/
-- create_current_views.sql). A versioned table's sorting key holds `version`, so a merge
-- collapses only the rows of two derivations of the same version (the same rows), never an
-- older version for a newer one: a newer one may not be published yet, and may never be if its
-- writer stopped. Tables are partitioned by day, so a TTL (collector/storage/clickhouse.py,
-- set_retention) drops whole days.
CREATE TABLE settings (
    key   String,
    value Float64,
    help  String
) ENGINE = MergeTree ORDER BY key;
INSERT INTO settings VALUES
    ('band_early_end', 1.0 / 3, 'Relative position (token midpoint / prompt tokens) below which a chunk is in the early band.'),
    ('band_late_start', 2.0 / 3, 'Relative position at or above which a chunk is in the late band.'),
    ('high_confidence', 0.8, 'Stated confidence at or above which a wrong answer counts as unsupported confidence.'),
    ('min_n', 30, 'Fewest graded requests before a week-over-week change is called out.');

CREATE TABLE spans (
    trace_id                 String,
    span_id                  String,
    parent_span_id           Nullable(String),
    name                     String,
    kind                     Int32,
    start_ns                 Int64,
    end_ns                   Int64,
    service                  Nullable(String),
    scope                    Nullable(String),
    status_code              Int32,
    dropped_attributes_count Int32,
    attributes               String,
    resource                 String,
    received_at              DateTime64(6, 'UTC')
) ENGINE = ReplacingMergeTree
PARTITION BY toYYYYMMDD(fromUnixTimestamp64Nano(start_ns, 'UTC'))
ORDER BY (trace_id, span_id);

-- One row per derivation of a trace, inserted after every other row of that derivation:
-- until it is here, none of them is read. `version` orders the derivations of a trace: the
-- number of spans it was derived from in the high 22 bits, the time it was derived at (ms
-- since 2024-01-01 UTC) in the low 42, so a derivation that saw more spans wins whatever
-- the clocks say. `has_request`: false when the trace's spans give no request (any rows of
-- an earlier derivation are then hidden).
CREATE TABLE derivations (
    request_id  Int64,
    trace_id    String,
    time        DateTime64(6, 'UTC'),
    version     UInt64,
    has_request Bool
) ENGINE = ReplacingMergeTree(version) PARTITION BY toYYYYMMDD(time) ORDER BY request_id;

CREATE TABLE requests_versions (
    request_id           Int64,
    trace_id             String,
    time                 DateTime64(6, 'UTC'),
    service              Nullable(String),
    model                Nullable(String),
    template_id          Nullable(String),
    template_version     Nullable(String),
    strategy             Nullable(String),
    experiment_id        Nullable(String),
    condition            Nullable(String),
    case_id              Nullable(String),
    question             Nullable(String),
    answer               Nullable(String),
    confidence           Nullable(Float64),
    answer_constraints   Array(String),
    cited_ids            Array(String),
    unresolved_conflicts Array(String),
    prompt_tokens        Nullable(Int32),
    prompt_chars         Nullable(Int32),
    evidence_tokens      Nullable(Int32),
    tokens_estimated     Bool,
    latency_ms           Nullable(Float64),
    cost_usd             Nullable(Float64),
    verifier_result      Nullable(String),
    convention           String,
    warnings             Array(String),
    version              UInt64
) ENGINE = ReplacingMergeTree PARTITION BY toYYYYMMDD(time) ORDER BY (request_id, version);

-- `time`: the request's, to partition by.
CREATE TABLE chunks_versions (
    request_id      Int64,
    chunk_id        String,
    ordinal         Int32,
    stage           String,
    drop_reason     Nullable(String),
    source_id       Nullable(String),
    source_position Nullable(Int32),
    retrieval_rank  Nullable(Int32),
    retrieval_score Nullable(Float64),
    rerank_rank     Nullable(Int32),
    rerank_score    Nullable(Float64),
    label           Nullable(String),
    authority       Nullable(String),
    updated         Nullable(Date32),
    decisive        Nullable(Bool),
    cited           Nullable(Bool),
    text_hash       Nullable(String),
    text_chars      Nullable(Int32),
    time            DateTime64(6, 'UTC'),
    version         UInt64
) ENGINE = ReplacingMergeTree PARTITION BY toYYYYMMDD(time) ORDER BY (request_id, version, ordinal);

CREATE TABLE chunk_texts (
    text_hash String,
    text      String
) ENGINE = ReplacingMergeTree ORDER BY text_hash;

CREATE TABLE placements_versions (
    request_id   Int64,
    chunk_id     String,
    prompt_index Int32,
    token_start  Nullable(Int32),
    token_end    Nullable(Int32),
    char_start   Nullable(Int32),
    char_end     Nullable(Int32),
    time         DateTime64(6, 'UTC'),
    version      UInt64
) ENGINE = ReplacingMergeTree PARTITION BY toYYYYMMDD(time)
ORDER BY (request_id, version, prompt_index);

-- Every outcome ever received, appended. A posted outcome ('api') has version 0 and is always
-- read; one sent as span attributes ('span') is derived with its trace and carries that
-- derivation's version. outcome_id orders arrivals across writers (time-based: ms since the
-- epoch in the high bits, collector/storage/clickhouse_store.py).
CREATE TABLE outcomes_versions (
    outcome_id           Int64,
    trace_id             String,
    origin               String,
    time                 Nullable(DateTime64(6, 'UTC')),
    received_at          DateTime64(6, 'UTC'),
    correct              Nullable(Bool),
    score                Nullable(Float64),
    decisive_chunk_ids   Array(String),
    required_constraints Array(String),
    recalled_constraints Array(String),
    reviewer             Nullable(String),
    note                 Nullable(String),
    -- whether the outcome sets the list: an empty list may be a grade ("none recalled")
    decisive_chunk_ids_set   Bool DEFAULT notEmpty(decisive_chunk_ids),
    required_constraints_set Bool DEFAULT notEmpty(required_constraints),
    recalled_constraints_set Bool DEFAULT notEmpty(recalled_constraints),
    version                  UInt64
) ENGINE = MergeTree PARTITION BY toYYYYMMDD(received_at) ORDER BY (trace_id, outcome_id);
{%- else -%}
CREATE TABLE settings (
    key   VARCHAR PRIMARY KEY,
    value DOUBLE NOT NULL,
    help  VARCHAR NOT NULL
);
INSERT INTO settings VALUES
    ('band_early_end', 1.0 / 3, 'Relative position (token midpoint / prompt tokens) below which a chunk is in the early band.'),
    ('band_late_start', 2.0 / 3, 'Relative position at or above which a chunk is in the late band.'),
    ('high_confidence', 0.8, 'Stated confidence at or above which a wrong answer counts as unsupported confidence.'),
    ('min_n', 30, 'Fewest graded requests before a week-over-week change is called out.');

CREATE TABLE spans (
    trace_id                 VARCHAR NOT NULL,
    span_id                  VARCHAR NOT NULL,
    parent_span_id           VARCHAR,
    name                     VARCHAR NOT NULL,
    kind                     INTEGER NOT NULL,
    start_ns                 BIGINT NOT NULL,
    end_ns                   BIGINT NOT NULL,
    service                  VARCHAR,
    scope                    VARCHAR,
    status_code              INTEGER NOT NULL,
    dropped_attributes_count INTEGER NOT NULL,
    attributes               VARCHAR NOT NULL,  -- JSON text of the span attributes
    resource                 VARCHAR NOT NULL,  -- JSON text of the resource attributes
    received_at              TIMESTAMPTZ NOT NULL,
    PRIMARY KEY (trace_id, span_id)
);

-- One row per request (one trace = one request). request_id is a dense integer key so the
-- metric views join on integers, not 32-character hex strings.
CREATE TABLE requests (
    request_id           BIGINT NOT NULL,
    trace_id             VARCHAR NOT NULL,
    time                 TIMESTAMPTZ NOT NULL,
    service              VARCHAR,
    model                VARCHAR,
    template_id          VARCHAR,
    template_version     VARCHAR,
    strategy             VARCHAR,
    experiment_id        VARCHAR,
    condition            VARCHAR,
    case_id              VARCHAR,
    question             VARCHAR,
    answer               VARCHAR,
    confidence           DOUBLE,
    answer_constraints   VARCHAR[],
    cited_ids            VARCHAR[],
    unresolved_conflicts VARCHAR[],
    prompt_tokens        INTEGER,
    prompt_chars         INTEGER,
    evidence_tokens      INTEGER,
    tokens_estimated     BOOLEAN NOT NULL,
    latency_ms           DOUBLE,
    cost_usd             DOUBLE,
    verifier_result      VARCHAR,
    convention           VARCHAR NOT NULL,
    warnings             VARCHAR[]
);
CREATE INDEX requests_trace_id ON requests (trace_id);

CREATE TABLE chunks (
    request_id      BIGINT NOT NULL,
    chunk_id        VARCHAR NOT NULL,
    ordinal         INTEGER NOT NULL,   -- order in which the app listed the chunk
    stage           VARCHAR NOT NULL,   -- retrieved | reranked | in_prompt | dropped
    drop_reason     VARCHAR,            -- budget | dedupe | filter | diversity
    source_id       VARCHAR,
    source_position INTEGER,
    retrieval_rank  INTEGER,
    retrieval_score DOUBLE,
    rerank_rank     INTEGER,
    rerank_score    DOUBLE,
    label           VARCHAR,
    authority       VARCHAR,
    updated         DATE,
    decisive        BOOLEAN,
    cited           BOOLEAN,
    text_hash       VARCHAR,            -- key into chunk_texts (schemas/chunk_hash.py)
    text_chars      INTEGER
);

-- Each distinct chunk text once, however many requests retrieved it.
CREATE TABLE chunk_texts (
    text_hash VARCHAR PRIMARY KEY,
    text      VARCHAR NOT NULL
);

-- One row per occurrence of a chunk in the final prompt, prompt_index 0-based in order.
CREATE TABLE placements (
    request_id   BIGINT NOT NULL,
    chunk_id     VARCHAR NOT NULL,
    prompt_index INTEGER NOT NULL,
    token_start  INTEGER,
    token_end    INTEGER,
    char_start   INTEGER,
    char_end     INTEGER
);

-- Every outcome ever received. origin 'span' = sent as span attributes (re-derived with
-- the trace), 'api' = posted to /v1/outcomes (kept forever, wins over 'span').
CREATE TABLE outcomes (
    outcome_id           BIGINT NOT NULL,
    trace_id             VARCHAR NOT NULL,
    origin               VARCHAR NOT NULL,
    time                 TIMESTAMPTZ,
    received_at          TIMESTAMPTZ NOT NULL,
    correct              BOOLEAN,
    score                DOUBLE,
    decisive_chunk_ids   VARCHAR[],
    required_constraints VARCHAR[],
    recalled_constraints VARCHAR[],
    reviewer             VARCHAR,
    note                 VARCHAR
);
CREATE INDEX outcomes_trace_id ON outcomes (trace_id);
{%- endif %}
