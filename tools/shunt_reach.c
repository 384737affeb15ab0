/* Whether LD_PRELOAD can reach a program (shunt_reach.h): the ELF file's
 * program headers (PT_INTERP) and section names (Go's). */
#include "shunt_reach.h"

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int shunt_reach_find(const char *cmd, char *out, size_t n)
{
	if (!cmd[0])
		return -1;
	if (strchr(cmd, '/')) {
		snprintf(out, n, "%s", cmd);
		return 0;
	}
	const char *path = getenv("PATH");
	if (!path)
		path = "/usr/local/bin:/bin:/usr/bin";
	for (const char *p = path;; p++) {
		const char *e = strchrnul(p, ':');
		char cand[PATH_MAX];
		struct stat st;
		/* (An empty element is the current directory, as for execvp.) */
		int l = snprintf(cand, sizeof cand, "%.*s%s%s", (int)(e - p), p, e > p ? "/" : "", cmd);
		if (l > 0 && (size_t)l < sizeof cand && stat(cand, &st) == 0 && S_ISREG(st.st_mode) &&
		    access(cand, X_OK) == 0) {
			snprintf(out, n, "%s", cand);
			return 0;
		}
		if (!*e)
			return -1;
		p = e;
	}
}

static int read_at(int fd, void *b, size_t n, off_t off)
{
	return pread(fd, b, n, off) == (ssize_t)n ? 0 : -1;
}

/* The section names Go's linker writes: build information and the
 * runtime's tables, present in every Go executable, stripped or not. */
static int go_section(const char *name)
{
	return !strcmp(name, ".go.buildinfo") || !strcmp(name, ".note.go.buildid") ||
	       !strcmp(name, ".gopclntab");
}

struct elf_facts {
	int interp;
	char go[32]; /* the Go section found, or "" */
};

/* One reader for both classes: the fields used have the same names. */
#define READ_ELF(Ehdr, Phdr, Shdr)                                                         \
	static int read_##Ehdr(int fd, struct elf_facts *f)                                \
	{                                                                                  \
		Ehdr eh;                                                                   \
		if (read_at(fd, &eh, sizeof eh, 0))                                        \
			return -1;                                                         \
		for (unsigned i = 0; i < eh.e_phnum; i++) {                                \
			Phdr ph;                                                           \
			if (read_at(fd, &ph, sizeof ph,                                    \
				    (off_t)(eh.e_phoff + (uint64_t)i * eh.e_phentsize)))   \
				return -1;                                                 \
			if (ph.p_type == PT_INTERP)                                        \
				f->interp = 1;                                             \
		}                                                                          \
		Shdr strs;                                                                 \
		if (!eh.e_shoff || eh.e_shstrndx == SHN_UNDEF || eh.e_shstrndx >= eh.e_shnum || \
		    read_at(fd, &strs, sizeof strs,                                        \
			    (off_t)(eh.e_shoff + (uint64_t)eh.e_shstrndx * eh.e_shentsize))) \
			return 0;                                                          \
		for (unsigned i = 0; i < eh.e_shnum; i++) {                                \
			Shdr sh;                                                           \
			char name[32] = "";                                                \
			if (read_at(fd, &sh, sizeof sh,                                    \
				    (off_t)(eh.e_shoff + (uint64_t)i * eh.e_shentsize)) || \
			    sh.sh_name >= strs.sh_size)                                    \
				continue;                                                  \
			ssize_t r = pread(fd, name, sizeof name - 1,                       \
					  (off_t)(strs.sh_offset + sh.sh_name));           \
			if (r <= 0)                                                        \
				continue;                                                  \
			name[r] = 0;                                                       \
			/* (The build information names it best.) */                      \
			if (go_section(name) && (!f->go[0] || !strcmp(name, ".go.buildinfo"))) \
				snprintf(f->go, sizeof f->go, "%s", name);                 \
		}                                                                          \
		return 0;                                                                  \
	}
READ_ELF(Elf64_Ehdr, Elf64_Phdr, Elf64_Shdr)
READ_ELF(Elf32_Ehdr, Elf32_Phdr, Elf32_Shdr)

/* "#!INTERP [ARG]": INTERP, or ARG's file on PATH when INTERP is env. */
static int shebang(const char *line, char *out, size_t n)
{
	char interp[PATH_MAX], arg[PATH_MAX] = "";
	if (sscanf(line, "#!%4095s %4095s", interp, arg) < 1)
		return -1;
	const char *base = strrchr(interp, '/');
	if (!strcmp(base ? base + 1 : interp, "env") && arg[0] && arg[0] != '-')
		return shunt_reach_find(arg, out, n);
	snprintf(out, n, "%s", interp);
	return 0;
}

static enum shunt_reach reach(const char *path, char *why, size_t n, int depth)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		snprintf(why, n, "%s: %s", path, strerror(errno));
		return SHUNT_REACH_UNKNOWN;
	}
	unsigned char id[EI_NIDENT + 1] = {0};
	struct elf_facts f = {0};
	int rc = -1;
	ssize_t got = pread(fd, id, sizeof id - 1, 0);
	if (got >= 2 && id[0] == '#' && id[1] == '!' && depth == 0) {
		char line[PATH_MAX * 2 + 8] = "", interp[PATH_MAX];
		ssize_t l = pread(fd, line, sizeof line - 1, 0);
		close(fd);
		if (l > 0)
			line[l] = 0;
		char *nl = strchr(line, '\n');
		if (nl)
			*nl = 0;
		if (shebang(line, interp, sizeof interp)) {
			snprintf(why, n, "%s: an unreadable #! line", path);
			return SHUNT_REACH_UNKNOWN;
		}
		return reach(interp, why, n, 1);
	}
	if (got == EI_NIDENT && !memcmp(id, ELFMAG, SELFMAG))
		rc = id[EI_CLASS] == ELFCLASS64   ? read_Elf64_Ehdr(fd, &f)
		     : id[EI_CLASS] == ELFCLASS32 ? read_Elf32_Ehdr(fd, &f)
						  : -1;
	close(fd);
	if (rc < 0) {
		snprintf(why, n, "%s: not an ELF executable shunt can read", path);
		return SHUNT_REACH_UNKNOWN;
	}
	if (f.go[0]) {
		snprintf(why, n,
			 "%s is a Go program (%s section%s): Go's runtime makes its own system calls "
			 "for network I/O, past libc",
			 path, f.go, f.interp ? "; dynamically linked, cgo: its sockets still bypass libc"
					      : ", statically linked");
		return SHUNT_REACH_GO;
	}
	if (!f.interp) {
		snprintf(why, n,
			 "%s is statically linked (no PT_INTERP): the dynamic linker never runs, so "
			 "LD_PRELOAD cannot load libshunt.so",
			 path);
		return SHUNT_REACH_STATIC;
	}
	snprintf(why, n, "%s is dynamically linked: LD_PRELOAD loads libshunt.so into it", path);
	return SHUNT_REACH_YES;
}

enum shunt_reach shunt_reach_file(const char *path, char *why, size_t n)
{
	return reach(path, why, n, 0);
}
