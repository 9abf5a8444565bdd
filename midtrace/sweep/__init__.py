"""The position sweep: measure a model's accuracy by evidence position on a team's own cases.

Stages, one module each, in the order a case travels: ``cases`` (read the JSON lines file),
``conditions`` (where the decisive chunk goes, then the packing strategy's prompt order),
``prompt`` (render the prompt and every chunk's character offsets), ``client`` (an
OpenAI-compatible chat endpoint with retries), ``grading``, ``recording`` (one OTel trace per
call), ``journal`` (what is recorded, for resuming), ``summary`` and ``runner``, which ties
them together. None of them imports DuckDB, Streamlit or the collector's server: the
``--db`` sink imports the store only when it is used.
"""
