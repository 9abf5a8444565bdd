-- The stored form of a RAG request. `spans` keeps what was received, so the derived rows
-- (requests, chunks, placements) can be rebuilt by a newer normalizer; `outcomes` keeps
-- every grade ever sent and `request_outcomes` (a view) merges them.

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
