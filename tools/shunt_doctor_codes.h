/* Every finding `shunt doctor` can report: its code, its level and what to
 * do, in one table.  docs/TROUBLESHOOTING.md ("shunt doctor") has the same
 * rows, with what each means; the docs_doctor test keeps the codes, levels
 * and fixes of both equal (the page may put words in `backticks`).
 *
 * X(ID, "code", LEVEL, "what to do") */
#ifndef SHUNT_DOCTOR_CODES_H
#define SHUNT_DOCTOR_CODES_H

#define SHUNT_DOCTOR_FINDINGS(X)                                                                   \
	X(CONFIG, "config", OK, "nothing")                                                         \
	X(CONFIG_DISABLED, "config-disabled", FAIL,                                               \
	  "set enable = yes where it says no (shunt config --show names the source)")              \
	X(CONFIG_KERNEL, "config-kernel", WARN,                                                    \
	  "default_transport = auto, with kernel rules for what must stay on TCP")                 \
	X(RUNDIR, "rundir", OK, "nothing")                                                         \
	X(RUNDIR_TOO_LONG, "rundir-too-long", FAIL,                                                \
	  "a rundir of at most 80 bytes: Unix socket names are made inside it")                    \
	X(RUNDIR_MISSING, "rundir-missing", FAIL,                                                  \
	  "make it (mode 0700; with shm_group, the group's with mode 2770) or its parent, or set " \
	  "rundir to a directory that can be made")                                                \
	X(RUNDIR_PERM, "rundir-perm", OK, "nothing")                                               \
	X(RUNDIR_OWNER, "rundir-owner", FAIL,                                                      \
	  "chown it to the user the programs run as (mode 0700), or share it with shm_group "      \
	  "(the group's, mode 2770)")                                                              \
	X(RUNDIR_WORLD_WRITABLE, "rundir-world-writable", FAIL,                                    \
	  "chmod o-w: anyone could plant offers and registry entries, and shunt refuses it")       \
	X(RUNDIR_GROUP_WRITABLE, "rundir-group-writable", FAIL,                                    \
	  "chmod 0700, or share it on purpose: shm_group and mode 2770 (docs/DEPLOY.md, Servers "  \
	  "that run as their own user)")                                                           \
	X(RUNDIR_READABLE, "rundir-readable", WARN,                                                \
	  "chmod 0700 (2770 when shared): whoever can read the rundir sees which addresses "       \
	  "listen under shunt and every process's counters")                                       \
	X(RUNDIR_GROUP, "rundir-group", FAIL,                                                      \
	  "chgrp it to the shm_group and chmod 2770 (setgid, group rwx, nothing for others)")      \
	X(GROUP_UNKNOWN, "group-unknown", WARN,                                                    \
	  "create the group (groupadd), or name one this host knows (getent group)")               \
	X(GROUP_MEMBER, "group-member", FAIL,                                                      \
	  "add the user to the group (usermod -aG GROUP USER, then log in again), or run as a "    \
	  "member")                                                                                \
	X(RUNDIR_PARENT, "rundir-parent", WARN,                                                    \
	  "keep the rundir in directories only root or its owner can write (or sticky ones like "  \
	  "/dev/shm): whoever can write a parent can replace the rundir")                          \
	X(RUNDIR_FS, "rundir-fs", OK, "nothing")                                                   \
	X(RUNDIR_DISK, "rundir-disk", WARN,                                                        \
	  "a memory-backed rundir: on tmpfs (/dev/shm, /run), or an emptyDir with medium: Memory")  \
	X(RUNDIR_ROOM, "rundir-room", OK, "nothing")                                               \
	X(RUNDIR_SPACE, "rundir-space", FAIL,                                                      \
	  "more room (a larger tmpfs, the emptyDir's sizeLimit), a smaller ring_size, or fewer "   \
	  "connections: each takes 2 x ring_size + 4 KiB (docs/DEPLOY.md, Memory)")                \
	X(RUNDIR_CLEAN, "rundir-clean", OK, "nothing")                                             \
	X(RUNDIR_STALE, "rundir-stale", WARN,                                                      \
	  "nothing urgent: the next process that uses shm, and shuntd every 5 s, remove them; "    \
	  "many mean that processes are being killed")                                             \
	X(AGENT, "agent", OK, "nothing")                                                           \
	X(AGENT_ABSENT, "agent-absent", WARN,                                                      \
	  "needed only by clients on other hosts: run shuntd here (systemctl enable --now "        \
	  "shuntd, or the sidecar) with the programs' configuration")                              \
	X(AGENT_SECRET, "agent-secret", FAIL,                                                      \
	  "the same agent_secret (or agent_secret_file contents) for shuntd and every shim of "    \
	  "the cluster")                                                                           \
	X(AGENT_SECRET_FILE, "agent-secret-file", FAIL,                                            \
	  "agent_secret_file: a regular file of 16 to 128 bytes, the user's, mode 0600")           \
	X(AGENT_UNHEALTHY, "agent-unhealthy", FAIL,                                                \
	  "restart shuntd (it makes missing subdirectories again); a rundir writable by others "   \
	  "it refuses")                                                                            \
	X(AGENT_RUNDIR, "agent-rundir", WARN,                                                      \
	  "run shuntd with the programs' rundir (the same shunt.conf, SHUNT_RUNDIR or rundir "     \
	  "setting)")                                                                              \
	X(AGENT_VERSION, "agent-version", WARN, "the same shunt version for shuntd and the programs") \
	X(AGENT_PROTOCOL, "agent-protocol", FAIL,                                                  \
	  "make agent_port shuntd's: another service, or another version of shunt, answers there") \
	X(FABRIC, "fabric", OK, "nothing")                                                         \
	X(FABRIC_LIB, "fabric-lib", FAIL,                                                          \
	  "install libfabric1 (and rdma-core for verbs), or fabric_provider = auto where there is " \
	  "no RDMA")                                                                               \
	X(FABRIC_PROVIDER, "fabric-provider", FAIL,                                                \
	  "name a provider fi_info -l lists (libfabric-bin) with FI_EP_MSG endpoints the "        \
	  "transport runs on (verbs, tcp), or fabric_provider = auto")                             \
	X(FABRIC_VERBS, "fabric-verbs", WARN,                                                      \
	  "install the NIC's rdma-core provider and libfabric's verbs provider (fi_info -p "       \
	  "verbs); in containers, the devices and locked memory (docs/DEPLOY.md, RDMA)")           \
	X(FABRIC_TCP, "fabric-tcp", WARN,                                                          \
	  "fabric_provider = auto outside tests: over libfabric's tcp provider the fabric path "   \
	  "is not faster than kernel TCP")                                                         \
	X(FABRIC_SELFTEST, "fabric-selftest", OK, "nothing")                                       \
	X(FABRIC_SELFTEST_FAILED, "fabric-selftest-failed", FAIL,                                  \
	  "send the finding's report with the bug; check the fabric findings above, and for "     \
	  "verbs the device, its port state (ibv_devinfo) and locked memory (ulimit -l)")          \
	X(TO, "to", OK, "nothing")                                                                 \
	X(TO_DISABLED, "to-disabled", FAIL, "set enable = yes (see config-disabled)")              \
	X(TO_RULE, "to-rule", WARN,                                                                \
	  "as configured; change the rule (shunt config --show) if it should be accelerated")      \
	X(TO_SERVER_RULE, "to-server-rule", WARN,                                                  \
	  "as configured for the server; change its rule if it should be accelerated")             \
	X(TO_NO_ROUTE, "to-no-route", FAIL,                                                        \
	  "the destination cannot be reached from here: check the address and the routes (ip "     \
	  "route get ADDRESS)")                                                                    \
	X(TO_NOT_SHUNT, "to-not-shunt", FAIL,                                                      \
	  "run the server under shunt with this side's rundir (the same user, or shm_group); "     \
	  "shunt stat -l lists the registered listeners")                                          \
	X(TO_STALE, "to-stale", FAIL,                                                              \
	  "the server died without removing its name: start it again under shunt (the next shm "  \
	  "user or shuntd removes the name)")                                                      \
	X(TO_PEER_CRED, "to-peer-cred", FAIL,                                                      \
	  "run both ends as one user, or give both the same shm_group and a group rundir "         \
	  "(docs/DEPLOY.md, Servers that run as their own user)")                                  \
	X(TO_SERVER_CRED, "to-server-cred", FAIL,                                                  \
	  "give the server's user a rundir it can use: the same shm_group for both ends with a "   \
	  "group rundir (docs/DEPLOY.md, Servers that run as their own user)")                     \
	X(TO_RING_ALLOC, "to-ring-alloc", FAIL, "fix the rundir findings above")                   \
	X(TO_NO_RDMA_ROUTE, "to-no-rdma-route", WARN,                                              \
	  "expected between hosts without RDMA; with RDMA NICs give this host (or container) the " \
	  "devices; fabric_provider = tcp only to test")                                           \
	X(TO_PROVIDER, "to-provider", FAIL, "fix the fabric findings above")                       \
	X(TO_NO_AGENT, "to-no-agent", FAIL,                                                        \
	  "run shuntd on the destination host with its server's rundir, and let agent_port "       \
	  "through (firewall, NetworkPolicy)")                                                     \
	X(TO_AGENT_SECRET, "to-agent-secret", FAIL, "the same agent_secret on both hosts")         \
	X(TO_REMOTE_NOT_SHUNT, "to-remote-not-shunt", FAIL,                                        \
	  "run the server there under shunt with the rundir its shuntd serves; connect to the "    \
	  "server's own address, not a ClusterIP")                                               \
	X(SOCKMAP, "sockmap", OK, "nothing")                                                       \
	X(SOCKMAP_OFF, "sockmap-off", OK,                                                          \
	  "nothing; shuntd --sockmap (root) short-cuts local TCP of programs shunt cannot "        \
	  "preload (Go, static binaries)")                                                         \
	X(SOCKMAP_UNAVAILABLE, "sockmap-unavailable", WARN,                                        \
	  "run shuntd as root on a kernel with BPF sockmap support, a cgroup v2 hierarchy and a "  \
	  "bpffs (its log says what stopped it), or sockmap = off")                                    \
	X(PROGRAM, "program", OK, "nothing")                                                       \
	X(PROGRAM_STATIC, "program-static", FAIL,                                                  \
	  "a dynamically linked build of the program (without -static); meanwhile it runs on TCP " \
	  "and its peers under shunt do not wait for it; shuntd --sockmap (root) short-cuts its "  \
	  "local TCP")                                                                             \
	X(PROGRAM_GO, "program-go", FAIL,                                                          \
	  "it runs on TCP, and its peers under shunt do not wait for it; shuntd --sockmap (root) " \
	  "short-cuts its local TCP")                                                              \
	X(PROGRAM_UNKNOWN, "program-unknown", WARN,                                                \
	  "name the program's executable file (a path, or a name on PATH)")

enum doctor_level { DOC_OK, DOC_WARN, DOC_FAIL };

enum doctor_code {
#define DOCTOR_CODE_ENUM(id, code, level, fix) DOC_##id,
	SHUNT_DOCTOR_FINDINGS(DOCTOR_CODE_ENUM)
#undef DOCTOR_CODE_ENUM
	DOC_COUNT
};

#endif
