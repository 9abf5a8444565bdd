"""midtrace's SQL: table migrations, metric views and named queries as Jinja templates, and
the one renderer (:mod:`midtrace.sql.sqlfiles`). Installed from this folder by the main
``midtrace`` distribution, not by the SDK: an application recording requests needs none of it.
"""
