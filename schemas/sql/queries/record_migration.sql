{% if engine == "clickhouse" -%}
INSERT INTO schema_migrations VALUES ({version:Int32}, {name:String}, {applied_at:DateTime64(6, 'UTC')});
{%- else -%}
INSERT INTO schema_migrations VALUES ($version, $name, $applied_at);
{%- endif %}
