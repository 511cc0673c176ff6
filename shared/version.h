/* sbx version and protocol constants shared by the agent and the host. */
#ifndef SBX_VERSION_H
#define SBX_VERSION_H

#define SBX_VERSION "0.1.0"

#endif
