#include "mcp_content.h"

#include <stdbool.h>
#include <string.h>

#include "../../common/jsonfind.h"
#include "../../common/util.h"

/* Raster images a client can show; the kernel sends them as standard base64. */
static bool is_image(const char *mime)
{
    static const char *const types[] = {"image/png", "image/jpeg", "image/gif", "image/webp"};
    for (size_t i = 0; mime && i < SBX_ARRAY_SIZE(types); i++)
        if (!strcmp(mime, types[i]))
            return true;
    return false;
}

static const char *base_name(const char *path)
{
    const char *s = strrchr(path, '/');
    return s ? s + 1 : path;
}

static void add_link(json_t *content, const char *url, const char *path, json_t *size, json_t *mime)
{
    json_t *l = json_pack("{s:s,s:s,s:s,s:s}", "type", "resource_link", "uri", url, "name",
                          base_name(path), "title", path);
    if (json_is_integer(size))
        json_object_set(l, "size", size);
    if (json_is_string(mime))
        json_object_set(l, "mimeType", mime);
    json_array_append_new(content, l);
}

/* Image data moves from the answer into image blocks, so it is not sent twice. */
static void take_images(json_t *answer, json_t *images)
{
    size_t i;
    json_t *o;
    json_array_foreach(json_object_get(answer, "outputs"), i, o)
    {
        const char *mime = json_string_value(json_object_get(o, "mime"));
        json_t *data = json_object_get(o, "data");
        if (!is_image(mime) || !json_is_string(data))
            continue;
        json_array_append_new(
            images, json_pack("{s:s,s:O,s:s}", "type", "image", "data", data, "mimeType", mime));
        json_object_set_new(o, "data",
                            json_sprintf("(image content block %zu)", json_array_size(images)));
    }
}

static void take_links(json_t *answer, json_t *links)
{
    /* sandbox_files read of a file too large to inline */
    json_t *url = json_object_get(answer, "url");
    const char *path = json_string_value(json_object_get(answer, "path"));
    if (json_is_string(url) && path && json_is_false(json_object_get(answer, "inline")))
        add_link(links, json_string_value(url), path, json_object_get(answer, "size"),
                 json_object_get(answer, "mime"));
    /* sandbox_files artifacts */
    size_t i;
    json_t *a;
    json_array_foreach(json_object_get(answer, "artifacts"), i, a)
    {
        const char *u = json_string_value(json_object_get(a, "url"));
        const char *p = json_string_value(json_object_get(a, "path"));
        if (u && p)
            add_link(links, u, p, json_object_get(a, "size"), json_object_get(a, "mime"));
    }
    /* sandbox_bash: the files the command wrote */
    const char *k;
    json_t *v;
    json_object_foreach(json_object_get(answer, "local_paths"), k, v)
    {
        if (!json_is_string(v))
            continue;
        json_t *size =
            json_object_get(sbx_json_find(json_object_get(answer, "files"), "path", k), "size");
        add_link(links, json_string_value(v), k, size, NULL);
    }
}

static json_t *text_block(const char *text, size_t len)
{
    if (len > MCP_TEXT_MAX) {
        json_t *t = json_sprintf("%.*s\n[truncated: %zu of %zu bytes shown; the whole answer is "
                                 "in structuredContent]",
                                 (int)MCP_TEXT_MAX, text, (size_t)MCP_TEXT_MAX, len);
        return json_pack("{s:s,s:o}", "type", "text", "text", t);
    }
    return json_pack("{s:s,s:s%}", "type", "text", "text", text, len);
}

json_t *mcp_tool_result(json_t *answer)
{
    json_t *sc = json_is_object(answer) ? json_deep_copy(answer) : json_object();
    json_t *images = json_array(), *links = json_array();
    take_images(sc, images);
    take_links(sc, links);
    _cleanup_free_ char *text = json_dumps(sc, JSON_COMPACT);
    json_t *content = json_array();
    json_array_append_new(content, text_block(text, strlen(text)));
    json_array_extend(content, images);
    json_array_extend(content, links);
    json_decref(images);
    json_decref(links);
    return json_pack("{s:o,s:o,s:b}", "content", content, "structuredContent", sc, "isError", 0);
}

json_t *mcp_tool_error(const struct sbx_err *err, json_t *details)
{
    json_t *e = json_pack("{s:s,s:s}", "code", err->code, "message", err->msg);
    if (json_is_object(details))
        json_object_update(e, details);
    json_t *text = json_sprintf("%s: %s", err->code, err->msg);
    json_t *cands = json_object_get(e, "candidates");
    if (json_array_size(cands)) {
        _cleanup_free_ char *c = json_dumps(cands, JSON_COMPACT);
        json_t *t2 = json_sprintf("%s\nnearest candidates: %s", json_string_value(text), c);
        json_decref(text);
        text = t2;
    }
    return json_pack("{s:[{s:s,s:o}],s:b,s:{s:o}}", "content", "type", "text", "text", text,
                     "isError", 1, "_meta", "sbx/error", e);
}
