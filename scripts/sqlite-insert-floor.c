/* The least time SQLite needs to insert rows into a plain table: a reference for
 * scripts/bench-transfer, not part of Stratus.
 *
 *     sqlite-insert-floor TSV DATABASE
 *
 * Reads TSV rows (name, title, timestamp, integer, double) into memory and converts the numbers
 * first (not timed), then
 * inserts them into `rows(name TEXT PRIMARY KEY, title TEXT, ts INTEGER, n INTEGER, score REAL)`
 * in one transaction with one prepared statement, in WAL mode with synchronous=NORMAL, and
 * prints the seconds the inserts and the commit took. No parsing, no JSON, no per-row SQL:
 * what any importer built on SQLite pays at least for this table.
 */
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

static void check(int rc, sqlite3 *db, const char *what) {
    if (rc != SQLITE_OK && rc != SQLITE_DONE && rc != SQLITE_ROW) {
        fprintf(stderr, "sqlite-insert-floor: %s: %s\n", what, sqlite3_errmsg(db));
        exit(1);
    }
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: sqlite-insert-floor TSV DATABASE\n");
        return 64;
    }
    FILE *input = fopen(argv[1], "rb");
    if (!input) { perror(argv[1]); return 66; }
    fseek(input, 0, SEEK_END);
    long size = ftell(input);
    fseek(input, 0, SEEK_SET);
    char *text = malloc(size + 1);
    if (!text || fread(text, 1, size, input) != (size_t)size) { perror("read"); return 66; }
    text[size] = 0;
    fclose(input);

    /* Split into rows and cells in place. */
    size_t capacity = 1 << 20, count = 0;
    char **cells = malloc(capacity * 5 * sizeof(char *));
    for (char *line = text; line < text + size && *line;) {
        char *end = strchr(line, '\n');
        if (end) *end = 0;
        if (count == capacity) {
            capacity *= 2;
            cells = realloc(cells, capacity * 5 * sizeof(char *));
        }
        char *cell = line;
        for (int i = 0; i < 5; i++) {
            cells[count * 5 + i] = cell;
            char *tab = strchr(cell, '\t');
            if (tab) { *tab = 0; cell = tab + 1; }
        }
        count++;
        if (!end) break;
        line = end + 1;
    }

    /* Numbers converted before the clock starts, too. */
    long long *integers = malloc(count * 2 * sizeof(long long));
    double *doubles = malloc(count * sizeof(double));
    for (size_t row = 0; row < count; row++) {
        integers[row * 2] = strtoll(cells[row * 5 + 2], 0, 10);
        integers[row * 2 + 1] = strtoll(cells[row * 5 + 3], 0, 10);
        doubles[row] = strtod(cells[row * 5 + 4], 0);
    }

    sqlite3 *db;
    check(sqlite3_open(argv[2], &db), db, "open");
    check(sqlite3_exec(db, "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;"
                           "CREATE TABLE rows(name TEXT PRIMARY KEY, title TEXT, ts INTEGER, n INTEGER, score REAL);", 0, 0, 0), db, "schema");
    sqlite3_stmt *insert;
    check(sqlite3_prepare_v2(db, "INSERT INTO rows VALUES (?, ?, ?, ?, ?)", -1, &insert, 0), db, "prepare");

    double start = now();
    check(sqlite3_exec(db, "BEGIN", 0, 0, 0), db, "begin");
    for (size_t row = 0; row < count; row++) {
        char **cell = cells + row * 5;
        sqlite3_bind_text(insert, 1, cell[0], -1, SQLITE_STATIC);
        sqlite3_bind_text(insert, 2, cell[1], -1, SQLITE_STATIC);
        sqlite3_bind_int64(insert, 3, integers[row * 2]);
        sqlite3_bind_int64(insert, 4, integers[row * 2 + 1]);
        sqlite3_bind_double(insert, 5, doubles[row]);
        check(sqlite3_step(insert), db, "insert");
        sqlite3_reset(insert);
    }
    check(sqlite3_exec(db, "COMMIT", 0, 0, 0), db, "commit");
    printf("%.3f\n", now() - start);
    sqlite3_finalize(insert);
    sqlite3_close(db);
    return 0;
}
