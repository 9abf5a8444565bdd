-- Per-request evidence facts, kept by the writer so the metric views read one row per request
-- instead of re-deriving them from every chunk and placement on each query (docs/metrics.md,
-- "Why request_evidence is a table"). Its definition is the view request_evidence_live; the
-- store refreshes the rows of every trace it writes or grades in the same transaction, and
-- rebuilds the whole table when that definition changes (derived_state.definition_hash).
CREATE TABLE request_evidence (
    request_id            BIGINT PRIMARY KEY,
    correct               BOOLEAN,
    score                 DOUBLE,
    graded_at             TIMESTAMPTZ,
    k                     INTEGER NOT NULL,
    n_chunks              INTEGER NOT NULL,
    decisive_source       VARCHAR,
    n_decisive            INTEGER NOT NULL,
    n_decisive_retrieved  INTEGER NOT NULL,
    n_decisive_in_prompt  INTEGER NOT NULL,
    decisive_slot         INTEGER,
    decisive_position     DOUBLE,
    decisive_min_position DOUBLE,
    decisive_max_position DOUBLE,
    retrieval_rr          DOUBLE,
    retrieval_ndcg        DOUBLE,
    prompt_rr             DOUBLE,
    prompt_ndcg           DOUBLE,
    n_cited               INTEGER NOT NULL,
    cites_decisive        BOOLEAN NOT NULL,
    cites_noncanonical    BOOLEAN NOT NULL,
    cited_other_sources   STRUCT(source_id VARCHAR, authority VARCHAR)[],
    n_required            INTEGER,
    n_recalled            INTEGER
);

CREATE TABLE derived_state (
    name            VARCHAR PRIMARY KEY,
    definition_hash VARCHAR NOT NULL,
    built_at        TIMESTAMPTZ NOT NULL
);
