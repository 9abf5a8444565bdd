{% if engine == "clickhouse" -%}
INSERT INTO derived_state VALUES ('request_evidence', {definition_hash:String}, {built_at:DateTime64(6, 'UTC')});
{%- else -%}
INSERT OR REPLACE INTO derived_state VALUES ('request_evidence', $definition_hash, $built_at);
{%- endif %}
