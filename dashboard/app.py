"""midtrace dashboard: the router. Pages live in dashboard/app_pages/, charts in figures.py.

Not `pages/`: Streamlit treats a `pages/` folder beside the entrypoint as an old-style
multipage app for the first run of a fresh server, running a deep-linked page script
without this router (no filters, no gate).

Run through `midtrace dashboard --url URL | --db PATH` (midtrace/supervise.py), which tells
this app where its data is through MIDTRACE_URL / MIDTRACE_DB.
"""

from __future__ import annotations

import streamlit as st

from midtrace.dashboard import case_set, data, filters, ui

st.set_page_config(page_title="midtrace", page_icon="◧", layout="wide",
                   initial_sidebar_state="expanded")

PAGES = {
    "Review": [
        st.Page("app_pages/overview.py", title="Overview", icon=":material/monitoring:",
                url_path="overview", default=True),
        st.Page("app_pages/position.py", title="Position", icon=":material/align_horizontal_center:",
                url_path="position"),
        st.Page("app_pages/citations.py", title="Citations", icon=":material/format_quote:",
                url_path="citations"),
        st.Page("app_pages/failures.py", title="Failures", icon=":material/report:",
                url_path="failures"),
        st.Page("app_pages/experiments.py", title="Experiments", icon=":material/science:",
                url_path="experiments"),
    ],
    "Inspect": [
        st.Page("app_pages/inspector.py", title="Trace inspector", icon=":material/search:",
                url_path="inspector"),
    ],
}

authed = not data.token_required() or ui.token_gate()
page = st.navigation(PAGES, position="sidebar" if authed else "hidden")
if not authed:
    st.stop()

with st.sidebar:
    st.text(f"Source: {data.describe_source()}")
case_set.sidebar()

facets = ui.query(data.facets)
if filters.data_range(facets) is None:
    ui.empty_state()
    st.stop()

st.session_state["_params"] = filters.query_params(filters.sidebar(facets))
st.session_state["_facets"] = facets
page.run()
