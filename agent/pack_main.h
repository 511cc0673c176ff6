/* `sbx-agent pack`: see pack_main.c. */
#ifndef SBX_AGENT_PACK_MAIN_H
#define SBX_AGENT_PACK_MAIN_H

/* argv holds what follows "pack": DIR [--exclude PATTERN]... [--name NAME]... [--skip-unsafe].
 * 0, 1 when packing failed, 2 on a bad command line. */
int sbx_pack_main(int argc, char **argv);

#endif
