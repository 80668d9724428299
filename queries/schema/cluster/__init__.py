"""The schema's cluster form: ON CLUSTER DDL, replicated engines, roles and grants."""
