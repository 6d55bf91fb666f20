/* The install agent (docs/skills.md): with an LLM configured (SBX_LLM_URL) and a skill whose
 * SKILL.md has an install section but no install script, a round asks the model for one shell
 * command at a time, runs it in the install sandbox and shows it the result, until the model
 * says the skill is installed or that it cannot be — with the round's instructions and
 * guidance in every prompt, and a bound on the steps. */
#ifndef SBX_SKILLS_INSTALL_AGENT_H
#define SBX_SKILLS_INSTALL_AGENT_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../../common/err.h"
#include "../auth/auth.h"

#define INSTALL_AGENT_STEPS_MAX 20
#define INSTALL_AGENT_BAD_REPLIES_MAX 3
#define INSTALL_AGENT_SECTION_MAX (16u * 1024u)
#define INSTALL_AGENT_OUTPUT_TAIL 4096 /* of each command's output, in the next prompt */
#define INSTALL_AGENT_HISTORY_MAX (64u * 1024u)
#define INSTALL_AGENT_COMMAND_TIMEOUT_S 300

struct llm;
struct manager;
struct install_agent;

/* What the round gives the agent; every call is on the loop. */
struct install_agent_host {
    /* A line of the transcript (kind "agent" for the model's replies, "step" otherwise). */
    void (*note)(void *data, const char *kind, const char *text);
    /* A command's output as it comes. */
    void (*output)(void *data, unsigned ch, const uint8_t *buf, size_t len);
    /* The guidance so far: an array of strings. */
    json_t *(*guidance)(void *data);
    /* Once: the skill is installed (ok) or not (why). The agent is freed after it. */
    void (*done)(void *data, bool ok, const char *why);
};

/* The install section of a SKILL.md (its first heading that names "install", to the next
 * heading of the same or a higher level), malloc'd, or NULL without one. */
char *install_agent_section(const char *skill_md, size_t len);

struct install_agent_params {
    struct llm *llm;
    struct manager *mgr;
    const struct auth_identity *who; /* whose the sandbox is */
    const char *sandbox_id;
    const char *name;         /* the skill */
    const char *section;      /* its install section */
    const char *instructions; /* the round's, or NULL */
    json_t *env;              /* for every command, borrowed for the call */
};

int install_agent_start(const struct install_agent_params *p, const struct install_agent_host *h,
                        void *data, struct install_agent **out, struct sbx_err *err);
/* Stop at once: the call or the command is dropped, done never runs, the agent is freed. */
void install_agent_stop(struct install_agent *a);

#endif
