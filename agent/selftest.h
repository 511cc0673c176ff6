/* `sbx-agent selftest`: proves, on the architecture it runs on, that the linked libarchive
 * and BearSSL really work. */
#ifndef SBX_AGENT_SELFTEST_H
#define SBX_AGENT_SELFTEST_H

#include <stdio.h>

/* Runs every check, writing one line per check to out; returns the number that failed. */
int sbx_selftest_run(FILE *out);

#endif
