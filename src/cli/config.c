#include "config.h"

#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../common/util.h"

char *cli_config_path(void)
{
    const char *xdg = getenv("XDG_CONFIG_HOME");
    if (xdg && *xdg)
        return sbx_xasprintf("%s/sbx/config", xdg);
    const char *home = getenv("HOME");
    if (home && *home)
        return sbx_xasprintf("%s/.config/sbx/config", home);
    return NULL;
}

static int load_file(struct cli_config *cfg, const char *path, struct sbx_err *err)
{
    struct stat st;
    if (stat(path, &st) < 0)
        return errno == ENOENT ? 0 : sbx_err_sys(err, errno, "%s", path);
    /* The file holds a key: refuse it when others could have read (or planted) it. */
    if (st.st_mode & 077)
        return sbx_err_set(err, EPERM, "config_mode",
                           "%s has mode %04o; it holds an API key, so it must be 0600 "
                           "(chmod 600 %s)",
                           path, (unsigned)(st.st_mode & 07777), path);
    _cleanup_free_ char *text = NULL;
    size_t len = 0;
    int r = sbx_read_file(path, CLI_CONFIG_MAX, &text, &len);
    if (r < 0)
        return sbx_err_sys(err, -r, "%s", path);
    json_error_t je;
    json_t *j = json_loadb(text, len, 0, &je);
    if (!json_is_object(j)) {
        json_decref(j);
        return sbx_err_set(err, EINVAL, "config_invalid", "%s: not a JSON object (line %d: %s)",
                           path, je.line, je.text);
    }
    const char *url = json_string_value(json_object_get(j, "url"));
    const char *key = json_string_value(json_object_get(j, "api_key"));
    if (url && *url)
        cfg->url = sbx_xstrdup(url);
    if (key && *key)
        cfg->key = sbx_xstrdup(key);
    json_decref(j);
    return 0;
}

int cli_config_load(struct cli_config *cfg, struct sbx_err *err)
{
    memset(cfg, 0, sizeof(*cfg));
    const char *url = getenv("SBX_URL"), *key = getenv("SBX_API_KEY");
    if (!(url && *url && key && *key)) {
        _cleanup_free_ char *path = cli_config_path();
        int r = path ? load_file(cfg, path, err) : 0;
        if (r < 0)
            return r;
    }
    if (url && *url) {
        free(cfg->url);
        cfg->url = sbx_xstrdup(url);
    }
    if (key && *key) {
        free(cfg->key);
        cfg->key = sbx_xstrdup(key);
    }
    if (!cfg->url)
        cfg->url = sbx_xstrdup(CLI_DEFAULT_URL);
    return 0;
}

void cli_config_release(struct cli_config *cfg)
{
    free(cfg->url);
    if (cfg->key)
        memset(cfg->key, 0, strlen(cfg->key));
    free(cfg->key);
    memset(cfg, 0, sizeof(*cfg));
}

int cli_config_save(const char *url, const char *key, struct sbx_err *err)
{
    _cleanup_free_ char *path = cli_config_path();
    if (!path)
        return sbx_err_set(err, ENOENT, "config_path", "neither XDG_CONFIG_HOME nor HOME is set");
    _cleanup_free_ char *dir = sbx_xstrdup(path);
    *strrchr(dir, '/') = '\0';
    int r = sbx_mkdir_p(dir, 0700);
    if (r < 0)
        return sbx_err_sys(err, -r, "creating %s", dir);
    json_t *j = json_pack("{s:s, s:s}", "url", url, "api_key", key);
    _cleanup_free_ char *text = json_dumps(j, JSON_INDENT(2));
    json_decref(j);
    size_t n = strlen(text);
    text = sbx_xrealloc(text, n + 2);
    text[n] = '\n';
    text[n + 1] = '\0';
    r = sbx_write_file_atomic(path, text, n + 1, 0600);
    memset(text, 0, n);
    if (r < 0)
        return sbx_err_sys(err, -r, "writing %s", path);
    return 0;
}
