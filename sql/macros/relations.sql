{#- Models and sources are named without their catalog and schema inside a view's SQL: a view
    reads `player_statistics`, not `"warehouse"."main"."player_statistics"`, so it keeps working
    when the file is renamed or attached under another name (DuckDB names a file's catalog after
    the file). -#}
{% macro ref() %}
  {%- do return(builtins.ref(*varargs, **kwargs).include(database=False, schema=False)) -%}
{% endmacro %}

{% macro source(source_name, table_name) %}
  {%- do return(builtins.source(source_name, table_name).include(database=False, schema=False)) -%}
{% endmacro %}
