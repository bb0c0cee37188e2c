#ifndef STRATUS_CLIBPQ_SHIM_H
#define STRATUS_CLIBPQ_SHIM_H
#include <libpq-fe.h>

// Pipeline mode arrived in libpq 14; Stratus needs it.
#ifndef LIBPQ_HAS_PIPELINING
#error "Stratus needs libpq 14 or newer (pipeline mode); install a newer libpq-dev"
#endif

// The PG_DIAG_* field codes are character macros, which Swift does not import.
static inline int stratus_pq_diag_sqlstate(void) { return PG_DIAG_SQLSTATE; }
static inline int stratus_pq_diag_message_primary(void) { return PG_DIAG_MESSAGE_PRIMARY; }
static inline int stratus_pq_diag_severity_nonlocalized(void) { return PG_DIAG_SEVERITY_NONLOCALIZED; }
static inline int stratus_pq_diag_constraint_name(void) { return PG_DIAG_CONSTRAINT_NAME; }
static inline int stratus_pq_diag_table_name(void) { return PG_DIAG_TABLE_NAME; }
static inline int stratus_pq_diag_column_name(void) { return PG_DIAG_COLUMN_NAME; }
static inline int stratus_pq_diag_schema_name(void) { return PG_DIAG_SCHEMA_NAME; }
#endif
