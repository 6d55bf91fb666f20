/* Variables and parameters: UnusedLocalVariable, UnusedParameters, UseLessForEach,
 * SelfAssign. Names compare as 1C compares them: ignoring case, Cyrillic included. */
#include "diag.h"

#include <stdlib.h>
#include <string.h>

static const struct bsl_node *nd(const struct bsl_ctx *c, uint32_t i)
{
    return &c->t->nodes[i];
}

enum ref_kind { REF_READ, REF_WRITE, REF_DECL, REF_LOOP };

struct ref {
    uint64_t hash;
    uint32_t tok;
    uint8_t kind;
};

struct refs {
    struct ref *v;
    size_t n, cap;
    bool oom;
};

static void push(struct refs *r, const struct bsl_ctx *c, uint32_t tok, enum ref_kind k)
{
    if (r->n == r->cap) {
        size_t nc = r->cap ? r->cap * 2 : 64;
        struct ref *q = realloc(r->v, nc * sizeof(*q));
        if (!q) {
            r->oom = true;
            return;
        }
        r->v = q;
        r->cap = nc;
    }
    r->v[r->n++] = (struct ref){c->lx->toks[tok].hash, tok, (uint8_t)k};
}

static bool same_name(const struct bsl_ctx *c, uint32_t a, uint32_t b)
{
    const struct bsl_token *x = &c->lx->toks[a], *y = &c->lx->toks[b];
    return x->hash == y->hash &&
           bsl_name_eq(c->lx->src + x->off, x->len, c->lx->src + y->off, y->len);
}

/* Every name a subtree reads or writes. */
static void collect(const struct bsl_ctx *c, uint32_t i, struct refs *r)
{
    const struct bsl_node *n = nd(c, i);
    switch (n->kind) {
    case N_IDENT:
        push(r, c, n->tok, REF_READ);
        return;
    case N_ASSIGN: {
        uint32_t target = n->child;
        if (target != BSL_NONE && nd(c, target)->kind == N_IDENT)
            push(r, c, nd(c, target)->tok, REF_WRITE);
        else if (target != BSL_NONE)
            collect(c, target, r);
        if (target != BSL_NONE && nd(c, target)->next != BSL_NONE)
            collect(c, nd(c, target)->next, r);
        return;
    }
    case N_VARDECL:
        for (uint32_t k = n->child; k != BSL_NONE; k = nd(c, k)->next)
            if (nd(c, k)->kind == N_IDENT)
                push(r, c, nd(c, k)->tok, REF_DECL);
        return;
    case N_FOR:
    case N_FOREACH: {
        uint32_t v = n->child;
        if (v != BSL_NONE && nd(c, v)->kind == N_IDENT)
            push(r, c, nd(c, v)->tok, REF_LOOP);
        for (uint32_t k = v == BSL_NONE ? BSL_NONE : nd(c, v)->next; k != BSL_NONE;
             k = nd(c, k)->next)
            collect(c, k, r);
        return;
    }
    default:
        for (uint32_t k = n->child; k != BSL_NONE; k = nd(c, k)->next)
            collect(c, k, r);
    }
}

/* Whether the name of token tok appears as a name anywhere in the subtree. */
static bool mentions(const struct bsl_ctx *c, uint32_t i, uint32_t tok)
{
    const struct bsl_node *n = nd(c, i);
    if (n->kind == N_IDENT && same_name(c, n->tok, tok))
        return true;
    for (uint32_t k = n->child; k != BSL_NONE; k = nd(c, k)->next)
        if (mentions(c, k, tok))
            return true;
    return false;
}

/* Parameters the platform passes to event, command and notification handlers, left unused
 * by design. */
static const char *const handler_params[] = {
    "Отказ",
    "Cancel",
    "СтандартнаяОбработка",
    "StandardProcessing",
    "РежимЗаписи",
    "WriteMode",
    "РежимПроведения",
    "PostingMode",
    "ДанныеЗаполнения",
    "FillingData",
    "ТекстЗаполнения",
    "FillingText",
    "ПроверяемыеРеквизиты",
    "CheckedAttributes",
    "Замещение",
    "Replacing",
    "Команда",
    "Command",
    "Элемент",
    "Item",
    "Источник",
    "Source",
    "ИмяСобытия",
    "EventName",
    "ДополнительныеПараметры",
    "AdditionalParameters",
    "ВыбранноеЗначение",
    "SelectedValue",
    "ИсточникВыбора",
    "ChoiceSource",
    "Поле",
    "Field",
    "Копирование",
    "Clone",
    "НоваяСтрока",
    "NewRow",
    "Группа",
    "Group",
    "Родитель",
    "Parent",
    "ДанныеВыбора",
    "ChoiceData",
    "ПараметрыВыбора",
    "ChoiceParameters",
    "ВыбраннаяСтрока",
    "SelectedRow",
    "ПараметрыПолученияДанных",
    "GetDataParameters",
    "Ожидание",
    "Waiting",
    "ПараметрыПеретаскивания",
    "DragParameters",
    "Направление",
    "Direction",
    "НавигационнаяСсылкаФорматированнойСтроки",
    "FormattedStringURL",
    "ДополнительнаяИнформация",
    "AdditionalInformation",
    "ВыбраннаяФорма",
    "SelectedForm",
    "ВидФормы",
    "FormType",
    "Отправитель",
    "Sender",
};

/* A name an event handler has: При/Перед/После/Обработка/On/Before/After followed by a
 * capital (ПриОткрытии, ТоварыПриИзменении, ОбработкаВыбора, OnOpen), or a notification's
 * ...Завершение/...Completion, or Подключаемый_... */
static bool handler_name(const struct bsl_ctx *c, uint32_t tok)
{
    static const char *const marks[] = {"При", "Перед",  "После", "Обработка",
                                        "On",  "Before", "After"};
    const struct bsl_token *t = &c->lx->toks[tok];
    const char *s = c->lx->src + t->off;
    size_t n = t->len;
    for (size_t i = 0; i < n; i++) {
        for (size_t k = 0; k < sizeof(marks) / sizeof(marks[0]); k++) {
            size_t m = strlen(marks[k]);
            if (i + m >= n || memcmp(s + i, marks[k], m))
                continue;
            unsigned char a = (unsigned char)s[i + m],
                          b = i + m + 1 < n ? (unsigned char)s[i + m + 1] : 0;
            bool upper =
                (a >= 'A' && a <= 'Z') || (a == 0xD0 && ((b >= 0x90 && b <= 0xAF) || b == 0x81));
            if (upper)
                return true;
        }
    }
    static const char *const parts[] = {
        "Завершение",  "Completion",    "Подключаемый_", "НачалоВыбора",
        "StartChoice", "АвтоПодбор",    "AutoComplete",  "ОкончаниеВводаТекста",
        "TextEditEnd", "Очистка",       "Clearing",      "Выбор",
        "Selection",   "Нажатие",       "Click",         "Перетаскивани",
        "Drag",        "Регулирование", "Tuning"};
    for (size_t k = 0; k < sizeof(parts) / sizeof(parts[0]); k++)
        if (memmem(s, n, parts[k], strlen(parts[k])))
            return true;
    return false;
}

static bool handler_param(const struct bsl_ctx *c, uint32_t tok)
{
    const struct bsl_token *t = &c->lx->toks[tok];
    for (size_t i = 0; i < sizeof(handler_params) / sizeof(handler_params[0]); i++)
        if (bsl_name_eq(c->lx->src + t->off, t->len, handler_params[i], strlen(handler_params[i])))
            return true;
    return false;
}

static int ref_cmp(const void *a, const void *b)
{
    const struct ref *x = a, *y = b;
    if (x->hash != y->hash)
        return x->hash < y->hash ? -1 : 1;
    return x->tok < y->tok ? -1 : x->tok > y->tok;
}

/* The first ref (sorted by hash, then position) of tok's name, or NULL. Names with the same
 * 64-bit folded hash are taken as the same name. */
static const struct ref *find(const struct bsl_ctx *c, const struct refs *r, uint32_t tok)
{
    uint64_t h = c->lx->toks[tok].hash;
    size_t lo = 0, hi = r->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (r->v[mid].hash < h)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < r->n && r->v[lo].hash == h ? &r->v[lo] : NULL;
}

/* Properties a managed form or an object (document, catalog item, record set, constant's value
 * manager) has in its own module under a bare name, which sbx-bsl cannot tell from locals
 * (it reads no metadata). */
static const char *const known_attributes[] = {
    "Модифицированность",
    "Modified",
    "Заголовок",
    "Title",
    "ТолькоПросмотр",
    "ReadOnly",
    "ТекущийЭлемент",
    "CurrentItem",
    "ПоложениеКоманднойПанели",
    "CommandBarLocation",
    "АвтоЗаголовок",
    "AutoTitle",
    "РежимОткрытияОкна",
    "WindowOpeningMode",
    "КлючСохраненияПоложенияОкна",
    "WindowOptionsKey",
    "КлючНазначенияИспользования",
    "PurposeUseKey",
    "ЗакрыватьПриВыборе",
    "CloseOnChoice",
    "ЗакрыватьПриЗакрытииВладельца",
    "CloseOnOwnerClose",
    "ВладелецФормы",
    "FormOwner",
    "РежимВыбора",
    "ChoiceMode",
    "МножественныйВыбор",
    "MultipleChoice",
    "Доступность",
    "Enabled",
    "Ширина",
    "Width",
    "Высота",
    "Height",
    "ЦветФона",
    "BackColor",
    "ПометкаУдаления",
    "DeletionMark",
    "Дата",
    "Date",
    "Номер",
    "Number",
    "Проведен",
    "Posted",
    "Код",
    "Code",
    "Наименование",
    "Description",
    "Родитель",
    "Parent",
    "Владелец",
    "Owner",
    "Значение",
    "Value",
    "ОбменДанными",
    "DataExchange",
    "ДополнительныеСвойства",
    "AdditionalProperties",
};

static bool known_attribute(const struct bsl_ctx *c, uint32_t tok)
{
    const struct bsl_token *t = &c->lx->toks[tok];
    for (size_t i = 0; i < sizeof(known_attributes) / sizeof(known_attributes[0]); i++)
        if (bsl_name_eq(c->lx->src + t->off, t->len, known_attributes[i],
                        strlen(known_attributes[i])))
            return true;
    return false;
}

/* Whether tok's name is mentioned outside method m (another method, the module's body). */
static bool used_elsewhere(const struct bsl_ctx *c, const struct refs *all, uint32_t m,
                           uint32_t tok)
{
    const struct ref *r = find(c, all, tok);
    const struct bsl_node *n = nd(c, m);
    for (; r && r < all->v + all->n && r->hash == c->lx->toks[tok].hash; r++)
        if (r->tok < n->first_tok || r->tok > n->last_tok)
            return true;
    return false;
}

static void check_method(struct bsl_ctx *c, uint32_t m, const struct refs *module_vars,
                         const struct refs *all)
{
    uint32_t ps = bsl_child(c->t, m, 0), body = bsl_child(c->t, m, 1);
    if (ps == BSL_NONE || body == BSL_NONE)
        return;
    struct refs r = {0};
    collect(c, body, &r);
    if (r.oom) {
        free(r.v);
        c->out->oom = true;
        return;
    }
    if (r.n)
        qsort(r.v, r.n, sizeof(*r.v), ref_cmp);
    char name[128];
    /* a handler's signature is the platform's; an empty body is a stub or a hook to fill in */
    bool handler = handler_name(c, nd(c, m)->tok) || nd(c, body)->child == BSL_NONE ||
                   (c->out->attributes && nd(c, m)->aux2 != BSL_NONE); /* a form's &НаКлиенте... */
    for (uint32_t p = nd(c, ps)->child; p != BSL_NONE; p = nd(c, p)->next) {
        uint32_t tok = nd(c, p)->tok;
        if (handler || handler_param(c, tok) || find(c, &r, tok))
            continue;
        bsl_tok_text(c->lx, tok, name, sizeof(name));
        bsl_emit(c, D_UNUSED_PARAMETERS, bsl_tok_range(c->lx, tok),
                 "The parameter \"%s\" is not used", name);
    }
    /* locals: declared by Перем or by a first assignment, neither a parameter nor a module
     * variable nor a loop's; unused when never read */
    for (size_t i = 0; i < r.n;) {
        size_t j = i;
        bool read = false, loop = false;
        const struct ref *first = NULL;
        for (; j < r.n && r.v[j].hash == r.v[i].hash; j++) {
            read |= r.v[j].kind == REF_READ;
            loop |= r.v[j].kind == REF_LOOP;
            if (!first && (r.v[j].kind == REF_DECL || r.v[j].kind == REF_WRITE))
                first = &r.v[j];
        }
        i = j;
        if (!first || read || loop || find(c, module_vars, first->tok))
            continue;
        /* in a form's or an object's module a bare name assigned without Перем may be one of
         * its attributes: only a name this method alone mentions counts as a local */
        if (c->out->attributes && first->kind == REF_WRITE &&
            (known_attribute(c, first->tok) || used_elsewhere(c, all, m, first->tok)))
            continue;
        bool param = false;
        for (uint32_t p = nd(c, ps)->child; p != BSL_NONE && !param; p = nd(c, p)->next)
            param = same_name(c, nd(c, p)->tok, first->tok);
        if (param)
            continue;
        bsl_tok_text(c->lx, first->tok, name, sizeof(name));
        bsl_emit(c, D_UNUSED_LOCAL_VARIABLE, bsl_tok_range(c->lx, first->tok),
                 "The local variable \"%s\" is never used", name);
    }
    free(r.v);
}

static void walk(struct bsl_ctx *c, uint32_t i)
{
    const struct bsl_node *n = nd(c, i);
    if (n->kind == N_FOREACH) {
        uint32_t v = n->child, body = bsl_child(c->t, i, 2);
        if (v != BSL_NONE && nd(c, v)->kind == N_IDENT && body != BSL_NONE &&
            nd(c, body)->child != BSL_NONE && !mentions(c, body, nd(c, v)->tok)) {
            char name[128];
            bsl_tok_text(c->lx, nd(c, v)->tok, name, sizeof(name));
            bsl_emit(c, D_USELESS_FOR_EACH, bsl_tok_range(c->lx, n->tok),
                     "The loop never uses its variable \"%s\"", name);
        }
    }
    if (n->kind == N_ASSIGN) {
        uint32_t target = n->child, value = target == BSL_NONE ? BSL_NONE : nd(c, target)->next;
        if (value != BSL_NONE && nd(c, target)->kind != N_ERROR && bsl_same_text(c, target, value))
            bsl_emit(c, D_SELF_ASSIGN, bsl_node_range(c->t, i),
                     "The variable is assigned to itself");
    }
    for (uint32_t k = n->child; k != BSL_NONE; k = nd(c, k)->next)
        if (nd(c, k)->kind < N_IDENT)
            walk(c, k);
}

void bsl_check_vars(struct bsl_ctx *c)
{
    const struct bsl_tree *t = c->t;
    if (t->root == BSL_NONE)
        return;
    struct refs module_vars = {0};
    for (uint32_t m = nd(c, t->root)->child; m != BSL_NONE; m = nd(c, m)->next)
        if (nd(c, m)->kind == N_VARDECL)
            for (uint32_t k = nd(c, m)->child; k != BSL_NONE; k = nd(c, k)->next)
                if (nd(c, k)->kind == N_IDENT)
                    push(&module_vars, c, nd(c, k)->tok, REF_DECL);
    if (module_vars.oom)
        c->out->oom = true;
    if (module_vars.n)
        qsort(module_vars.v, module_vars.n, sizeof(*module_vars.v), ref_cmp);
    struct refs all = {0}; /* every name of the module, where attributes may hide */
    if (c->out->attributes && bsl_on(c, D_UNUSED_LOCAL_VARIABLE)) {
        collect(c, t->root, &all);
        if (all.oom)
            c->out->oom = true;
        if (all.n)
            qsort(all.v, all.n, sizeof(*all.v), ref_cmp);
    }
    for (uint32_t m = nd(c, t->root)->child; m != BSL_NONE; m = nd(c, m)->next) {
        if (nd(c, m)->kind == N_METHOD &&
            (bsl_on(c, D_UNUSED_LOCAL_VARIABLE) || bsl_on(c, D_UNUSED_PARAMETERS)))
            check_method(c, m, &module_vars, &all);
        walk(c, m);
    }
    free(all.v);
    free(module_vars.v);
}
