/* Virus scanning with libclamav. The engine loads the system's ClamAV database when
 * one is installed plus the signature set this project ships (share/signatures, with
 * the EICAR test string), and is compiled once, on the first scan, by whichever worker
 * thread gets there first; a compiled engine is safe to share between threads. Its
 * scratch directory is one of its own in /dev/shm unless TMPDIR is set. */
#ifndef SBX_SCAN_H
#define SBX_SCAN_H

#include <jansson.h>

#include "../../common/err.h"

enum scan_verdict { SCAN_CLEAN, SCAN_INFECTED, SCAN_ERROR };

/* Where scans keep their scratch directory unless TMPDIR says otherwise (scan.c). */
#define SCAN_SCRATCH_PARENT "/dev/shm"

struct scanner;

/* Nothing is loaded yet; paths are copied. */
struct scanner *scanner_new(const char *system_db, const char *own_set);
void scanner_free(struct scanner *s);

/* Scan the file open on fd (from its start). virus gets the signature name when
 * infected, the reason when SCAN_ERROR. Thread-safe. */
enum scan_verdict scanner_scan_fd(struct scanner *s, int fd, char *virus, size_t virus_len);
/* The same for len bytes in memory, which stay untouched. */
enum scan_verdict scanner_scan_mem(struct scanner *s, const void *buf, size_t len, char *virus,
                                   size_t virus_len);
const char *scan_verdict_name(enum scan_verdict v);

/* {"engine":"clamav", "version", "databases":[…], "signatures":N} or, when the engine
 * could not be built, {"engine":"clamav", "error": …}. Valid after a scan. */
json_t *scanner_describe(struct scanner *s);

#endif
