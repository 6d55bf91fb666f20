/* sbx-bsl (src/bsl/): the lexer, the parser's recovery, and each diagnostic in both keyword
 * languages, on code that triggers it (at its line) and on code that must not. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/bsl/diag.h"
#include "../../src/bsl/report.h"
#include "../../src/bsl/walk.h"
#include "check.h"

static bool all[D_COUNT_];

/* The lines (up to 8) where code is reported in src; returns the count. */
static int lines_of(const char *src, const char *code, unsigned *lines)
{
    struct bsl_diags d = {0};
    struct bsl_err err = {0};
    if (bsl_analyze(src, strlen(src), all, &d, &err) < 0)
        return -1;
    int n = 0;
    for (size_t i = 0; i < d.n; i++)
        if (!strcmp(bsl_diag_info(d.v[i].id)->code, code)) {
            if (n < 8)
                lines[n] = d.v[i].range.start.line;
            n++;
        }
    bsl_diags_free(&d);
    return n;
}

/* The whole list as "Code@line " for failure messages. */
static void dump(const char *src, char *buf, size_t size)
{
    struct bsl_diags d = {0};
    struct bsl_err err = {0};
    buf[0] = 0;
    if (bsl_analyze(src, strlen(src), all, &d, &err) < 0)
        return;
    size_t o = 0;
    for (size_t i = 0; i < d.n && o + 64 < size; i++)
        o += (size_t)snprintf(buf + o, size - o, "%s@%u ", bsl_diag_info(d.v[i].id)->code,
                              d.v[i].range.start.line);
    bsl_diags_free(&d);
}

struct dcase {
    const char *code, *what, *src;
    unsigned line; /* the line it must be reported on; 0: not reported at all */
};

static const struct dcase cases[] = {
    /* ParseError */
    {"ParseError", "ru: missing КонецЕсли",
     "Процедура А()\n\tЕсли Б Тогда\n\t\tВ = 1;\nКонецПроцедуры\n", 4},
    {"ParseError", "en: stray operator", "Procedure A()\n\tX = 1 +;\nEndProcedure\n", 2},
    {"ParseError", "ru: clean",
     "Процедура А()\n\tЕсли Б Тогда\n\t\tВ = 1;\n\tКонецЕсли;\nКонецПроцедуры\n", 0},
    {"ParseError", "en: clean", "Procedure A()\n\tIf B Then\n\t\tC = 1;\n\tEndIf;\nEndProcedure\n",
     0},
    /* UnusedLocalVariable */
    {"UnusedLocalVariable", "ru: assigned, never read",
     "Процедура А()\n\tЛишняя = 1;\n\tСообщитьПользователю(\"x\");\nКонецПроцедуры\n", 2},
    {"UnusedLocalVariable", "en: declared by Var",
     "Procedure A()\n\tVar Extra;\n\tDoIt();\nEndProcedure\n", 2},
    {"UnusedLocalVariable", "ru: read later",
     "Функция А()\n\tИтог = 1;\n\tВозврат Итог;\nКонецФункции\n", 0},
    {"UnusedLocalVariable", "en: member write reads it",
     "Procedure A()\n\tS = New Structure;\n\tS.X = 1;\n\tSave(S);\nEndProcedure\n", 0},
    {"UnusedLocalVariable", "ru: module variable",
     "Перем Кэш;\nПроцедура А()\n\tКэш = 1;\nКонецПроцедуры\n", 0},
    /* UnusedParameters */
    {"UnusedParameters", "ru: unused", "Функция А(Б, В)\n\tВозврат Б;\nКонецФункции\n", 1},
    {"UnusedParameters", "en: unused", "Function A(B, C)\n\tReturn C;\nEndFunction\n", 1},
    {"UnusedParameters", "ru: all used", "Функция А(Б, В)\n\tВозврат Б + В;\nКонецФункции\n", 0},
    {"UnusedParameters", "ru: a handler's Отказ",
     "Процедура ПередЗаписью(Отказ)\n\tЗаписать();\nКонецПроцедуры\n", 0},
    {"UnusedParameters", "ru: a form event handler",
     "&НаКлиенте\nПроцедура ТоварыПриИзменении(Элемент, Данные)\n\tЗаписать();\nКонецПроцедуры\n",
     0},
    {"UnusedParameters", "en: a notification callback",
     "&AtClient\nProcedure QuestionCompletion(Result, Extra) "
     "Export\n\tWrite(Result);\nEndProcedure\n",
     0},
    {"UnusedParameters", "ru: a server function with a directive",
     "&НаСервере\nФункция Данные(Ссылка, Лишний)\n\tВозврат Ссылка;\nКонецФункции\n", 2},
    {"UnusedParameters", "ru: При+lower-case is no handler",
     "Процедура Применить(Лишний)\n\tЗаписать();\nКонецПроцедуры\n", 1},
    /* EmptyCodeBlock */
    {"EmptyCodeBlock", "ru: empty Если",
     "Процедура А()\n\tЕсли Б Тогда\n\tКонецЕсли;\nКонецПроцедуры\n", 2},
    {"EmptyCodeBlock", "en: empty While", "Procedure A()\n\tWhile B Do\n\tEndDo;\nEndProcedure\n",
     2},
    {"EmptyCodeBlock", "ru: a block with code",
     "Процедура А()\n\tПока Б Цикл\n\t\tБ = Ложь;\n\tКонецЦикла;\nКонецПроцедуры\n", 0},
    /* LineLength */
    {"LineLength", "ru: 130 characters",
     "Процедура А()\n\tСтрока = "
     "\"ЙЙЙЙЙЙЙЙЙЙЙЙЙЙЙЙЙЙЙЙЙЙЙЙЙЙЙЙЙЙЙЙЙЙЙЙЙЙЙЙЙЙЙЙЙЙЙЙЙЙЙЙЙЙЙЙЙЙЙЙЙЙЙЙЙЙЙЙЙЙЙЙЙЙЙЙЙЙЙЙЙЙЙЙЙЙЙЙЙЙЙ"
     "ЙЙЙЙЙЙЙЙЙЙЙЙЙЙЙЙЙЙЙЙЙЙЙЙЙЙЙЙЙЙЙЙЙЙЙЙЙЙЙЙЙЙЙ\";\n\tЗаписать(Строка);\nКонецПроцедуры\n",
     2},
    {"LineLength", "ru: 100 Cyrillic letters (200 bytes) is short",
     "Процедура А()\n\tС = "
     "\"ЙЙЙЙЙЙЙЙЙЙЙЙЙЙЙЙЙЙЙЙЙЙЙЙЙЙЙЙЙЙЙЙЙЙЙЙЙЙЙЙЙЙЙЙЙЙЙЙЙЙЙЙЙЙЙЙЙЙЙЙЙЙЙЙЙЙЙЙЙЙЙЙЙЙЙЙЙЙЙЙЙЙЙЙЙЙЙЙЙЙЙ"
     "ЙЙЙЙЙЙЙЙЙЙЙЙЙЙЙ\";\n\tЗаписать(С);\nКонецПроцедуры\n",
     0},
    /* CanonicalSpellingKeywords */
    {"CanonicalSpellingKeywords", "ru: lower case",
     "процедура А()\n\tЗаписать();\nКонецПроцедуры\n", 1},
    {"CanonicalSpellingKeywords", "en: upper case",
     "Procedure A()\n\tIF B THEN\n\t\tC();\n\tEndIf;\nEndProcedure\n", 2},
    {"CanonicalSpellingKeywords", "ru: canonical, and a member named like a keyword",
     "Процедура А()\n\tЕсли Б И Не В "
     "Тогда\n\t\tЗапрос.выполнить();\n\tКонецЕсли;\nКонецПроцедуры\n",
     0},
    /* SemicolonPresence */
    {"SemicolonPresence", "ru: last statement without ;",
     "Процедура А()\n\tБ = 1;\n\tЗаписать(Б)\nКонецПроцедуры\n", 3},
    {"SemicolonPresence", "en: EndIf without ;",
     "Procedure A()\n\tIf B Then\n\t\tC();\n\tEndIf\nEndProcedure\n", 4},
    {"SemicolonPresence", "ru: every ; there",
     "Процедура А()\n\tБ = 1;\n\tЗаписать(Б);\nКонецПроцедуры\n", 0},
    /* FunctionShouldHaveReturn */
    {"FunctionShouldHaveReturn", "ru: no Возврат",
     "Функция А()\n\tБ = 1;\n\tЗаписать(Б);\nКонецФункции\n", 1},
    {"FunctionShouldHaveReturn", "en: only one branch returns",
     "Function A(B)\n\tIf B Then\n\t\tReturn 1;\n\tEndIf;\nEndFunction\n", 1},
    {"FunctionShouldHaveReturn", "ru: both branches return",
     "Функция А(Б)\n\tЕсли Б Тогда\n\t\tВозврат 1;\n\tИначе\n\t\tВозврат "
     "2;\n\tКонецЕсли;\nКонецФункции\n",
     0},
    {"FunctionShouldHaveReturn", "en: try returns, except raises",
     "Function A()\n\tTry\n\t\tReturn B();\n\tExcept\n\t\tRaise;\n\tEndTry;\nEndFunction\n", 0},
    /* ProcedureReturnsValue */
    {"ProcedureReturnsValue", "ru: Возврат 1 in a procedure",
     "Процедура А()\n\tЗаписать();\n\tВозврат 1;\nКонецПроцедуры\n", 3},
    {"ProcedureReturnsValue", "en: Return 1 in a procedure",
     "Procedure A()\n\tReturn True;\nEndProcedure\n", 2},
    {"ProcedureReturnsValue", "ru: bare Возврат",
     "Процедура А(Б)\n\tЕсли Б Тогда\n\t\tВозврат;\n\tКонецЕсли;\n\tЗаписать();\nКонецПроцедуры\n",
     0},
    /* UnreachableCode */
    {"UnreachableCode", "ru: after Возврат",
     "Функция А()\n\tВозврат 1;\n\tЗаписать();\nКонецФункции\n", 3},
    {"UnreachableCode", "en: after Raise",
     "Procedure A()\n\tRaise \"no\";\n\tWrite();\nEndProcedure\n", 3},
    {"UnreachableCode", "ru: a preprocessor branch",
     "Функция А()\n#Если Сервер Тогда\n\tВозврат 1;\n#Иначе\n\tВозврат "
     "2;\n#КонецЕсли\nКонецФункции\n",
     0},
    {"UnreachableCode", "en: return last", "Function A()\n\tWrite();\n\tReturn 1;\nEndFunction\n",
     0},
    /* NestedTernaryOperator */
    {"NestedTernaryOperator", "ru: nested",
     "Процедура А(Б, В)\n\tГ = ?(Б, ?(В, 1, 2), 3);\n\tЗаписать(Г);\nКонецПроцедуры\n", 2},
    {"NestedTernaryOperator", "en: nested in else",
     "Procedure A(B, C)\n\tD = ?(B, 1,\n\t\t?(C, 2, 3));\n\tWrite(D);\nEndProcedure\n", 3},
    {"NestedTernaryOperator", "ru: two flat ones",
     "Процедура А(Б, В)\n\tГ = ?(Б, 1, 2) + ?(В, 1, 2);\n\tЗаписать(Г);\nКонецПроцедуры\n", 0},
    /* NumberOfParams */
    {"NumberOfParams", "ru: 8 parameters",
     "Функция А(П1, П2, П3, П4, П5, П6, П7, П8)\n\tВозврат "
     "П1+П2+П3+П4+П5+П6+П7+П8;\nКонецФункции\n",
     1},
    {"NumberOfParams", "en: 7 parameters",
     "Function A(P1, P2, P3, P4, P5, P6, P7)\n\tReturn P1+P2+P3+P4+P5+P6+P7;\nEndFunction\n", 0},
    /* CommentedCode */
    {"CommentedCode", "ru: a commented statement",
     "Процедура А()\n\tЗаписать();\n\t// Б = В + 1;\n\t// Записать(Б);\nКонецПроцедуры\n", 3},
    {"CommentedCode", "en: commented If",
     "Procedure A()\n\t//If B Then\n\t//\tWrite();\n\t//EndIf;\n\tWrite();\nEndProcedure\n", 2},
    {"CommentedCode", "ru: prose and a description",
     "// Записывает данные.\n//\n// Параметры:\n//  Б - Число - что записать.\nПроцедура "
     "А(Б)\n\t// Если данных нет, ничего не делаем\n\tЗаписать(Б);\nКонецПроцедуры\n",
     0},
    {"CommentedCode", "ru: prose with semicolons in a method",
     "Процедура А()\n\t// Итог: Истина - записано; Ложь - нет;\n\tЗаписать();\nКонецПроцедуры\n",
     0},
    {"CommentedCode", "ru: a commented Возврат",
     "Функция А()\n\t// Возврат Неопределено;\n\tВозврат 1;\nКонецФункции\n", 2},
    /* UsingServiceTag */
    {"UsingServiceTag", "ru: TODO",
     "Процедура А()\n\t// TODO: доделать\n\tЗаписать();\nКонецПроцедуры\n", 2},
    {"UsingServiceTag", "en: FIXME", "Procedure A()\n\tWrite(); // fixme later\nEndProcedure\n", 2},
    {"UsingServiceTag", "ru: plain comment",
     "Процедура А()\n\t// Записываем методом todolist (одно "
     "слово)\n\tЗаписать();\nКонецПроцедуры\n",
     0},
    /* DuplicateRegion */
    {"DuplicateRegion", "ru: twice",
     "#Область Служебные\n#КонецОбласти\n#Область Служебные\n#КонецОбласти\n", 3},
    {"DuplicateRegion", "en: twice, other case",
     "#Region Private\n#EndRegion\n#Region PRIVATE\n#EndRegion\n", 3},
    {"DuplicateRegion", "ru: same name in different parents",
     "#Область А\n#Область Вн\n#КонецОбласти\n#КонецОбласти\n#Область Б\n#Область "
     "Вн\n#КонецОбласти\n#КонецОбласти\n",
     0},
    /* IfElseIfEndsWithElse */
    {"IfElseIfEndsWithElse", "ru: no Иначе",
     "Процедура А(Б)\n\tЕсли Б = 1 Тогда\n\t\tЗаписать(1);\n\tИначеЕсли Б = 2 "
     "Тогда\n\t\tЗаписать(2);\n\tКонецЕсли;\nКонецПроцедуры\n",
     2},
    {"IfElseIfEndsWithElse", "en: no Else",
     "Procedure A(B)\n\tIf B = 1 Then\n\t\tWrite(1);\n\tElsIf B = 2 "
     "Then\n\t\tWrite(2);\n\tEndIf;\nEndProcedure\n",
     2},
    {"IfElseIfEndsWithElse", "ru: with Иначе",
     "Процедура А(Б)\n\tЕсли Б = 1 Тогда\n\t\tЗаписать(1);\n\tИначеЕсли Б = 2 "
     "Тогда\n\t\tЗаписать(2);\n\tИначе\n\t\tЗаписать(3);\n\tКонецЕсли;\nКонецПроцедуры\n",
     0},
    /* UseLessForEach */
    {"UseLessForEach", "ru: variable unused",
     "Процедура А(Список)\n\tДля Каждого Элемент Из Список "
     "Цикл\n\t\tЗаписать(Список);\n\tКонецЦикла;\nКонецПроцедуры\n",
     2},
    {"UseLessForEach", "en: variable unused",
     "Procedure A(List)\n\tFor Each Item In List Do\n\t\tWrite(List);\n\tEndDo;\nEndProcedure\n",
     2},
    {"UseLessForEach", "ru: variable used (other case)",
     "Процедура А(Список)\n\tДля Каждого Элемент Из Список "
     "Цикл\n\t\tЗаписать(ЭЛЕМЕНТ);\n\tКонецЦикла;\nКонецПроцедуры\n",
     0},
    /* MissingCodeTryCatchEx */
    {"MissingCodeTryCatchEx", "ru: empty Исключение",
     "Процедура А()\n\tПопытка\n\t\tЗаписать();\n\tИсключение\n\tКонецПопытки;\nКонецПроцедуры\n",
     4},
    {"MissingCodeTryCatchEx", "en: empty Except",
     "Procedure A()\n\tTry\n\t\tWrite();\n\tExcept\n\tEndTry;\nEndProcedure\n", 4},
    {"MissingCodeTryCatchEx", "ru: handled",
     "Процедура "
     "А()\n\tПопытка\n\t\tЗаписать();\n\tИсключение\n\t\tЗаписьЖурналаРегистрации(\"А\");"
     "\n\tКонецПопытки;\nКонецПроцедуры\n",
     0},
    /* EmptyStatement */
    {"EmptyStatement", "ru: ;;", "Процедура А()\n\tЗаписать();;\nКонецПроцедуры\n", 2},
    {"EmptyStatement", "en: clean", "Procedure A()\n\tWrite();\nEndProcedure\n", 0},
    /* UsingGoto */
    {"UsingGoto", "ru: Перейти",
     "Процедура А()\n\tПерейти ~Конец;\n~Конец:\n\tЗаписать();\nКонецПроцедуры\n", 2},
    {"UsingGoto", "en: clean", "Procedure A()\n\tWrite();\nEndProcedure\n", 0},
    /* SelfAssign */
    {"SelfAssign", "ru: А = А", "Процедура А(Б)\n\tБ = б;\nКонецПроцедуры\n", 2},
    {"SelfAssign", "en: member", "Procedure A(B)\n\tB.X = B.X;\nEndProcedure\n", 2},
    {"SelfAssign", "ru: a call is not",
     "Процедура А(Б)\n\tБ = Б(1);\n\tБ.Х = Б.Х + 1;\nКонецПроцедуры\n", 0},
    /* EmptyRegion */
    {"EmptyRegion", "ru: nothing inside", "#Область Пустая\n// только комментарий\n#КонецОбласти\n",
     1},
    {"EmptyRegion", "en: code inside", "#Region Api\nProcedure A()\nEndProcedure\n#EndRegion\n", 0},
    /* IdenticalExpressions */
    {"IdenticalExpressions", "ru: А = А in a condition",
     "Процедура А(Б)\n\tЕсли Б.Х = б.х Тогда\n\t\tЗаписать();\n\tКонецЕсли;\nКонецПроцедуры\n", 2},
    {"IdenticalExpressions", "en: A AND A",
     "Procedure A(B)\n\tIf B AND B Then\n\t\tWrite();\n\tEndIf;\nEndProcedure\n", 2},
    {"IdenticalExpressions", "ru: А + А and calls are fine",
     "Функция А(Б)\n\tВозврат Б + Б + Ф() - Ф();\nКонецФункции\n", 0},
    /* PairingBrokenTransaction */
    {"PairingBrokenTransaction", "ru: begun, never committed",
     "Процедура А()\n\tНачатьТранзакцию();\n\tЗаписать();\nКонецПроцедуры\n", 2},
    {"PairingBrokenTransaction", "en: paired",
     "Procedure "
     "A()\n\tBeginTransaction();\n\tTry\n\t\tWrite();\n\t\tCommitTransaction();"
     "\n\tExcept\n\t\tRollbackTransaction();\n\t\tRaise;\n\tEndTry;\nEndProcedure\n",
     0},
    /* ExecuteExternalCode */
    {"ExecuteExternalCode", "ru: Выполнить",
     "Процедура А(Код)\n\tВыполнить(Код);\nКонецПроцедуры\n", 2},
    {"ExecuteExternalCode", "en: Eval", "Function A(Code)\n\tReturn Eval(Code);\nEndFunction\n", 2},
    {"ExecuteExternalCode", "ru: a member named so",
     "Процедура А(Запрос)\n\tЗапрос.Выполнить();\nКонецПроцедуры\n", 0},
    /* DeprecatedMessage */
    {"DeprecatedMessage", "ru: Сообщить",
     "Процедура А()\n\tСообщить(\"Привет\");\nКонецПроцедуры\n", 2},
    {"DeprecatedMessage", "en: Message", "Procedure A()\n\tMessage(\"Hi\");\nEndProcedure\n", 2},
    {"DeprecatedMessage", "ru: a member of that name",
     "Процедура А(Б)\n\tБ.Сообщить();\nКонецПроцедуры\n", 0},
};

static char *repeat(const char *head, const char *line, int n, const char *tail)
{
    size_t size = strlen(head) + strlen(line) * (size_t)n + strlen(tail) + 1;
    char *s = malloc(size);
    strcpy(s, head);
    for (int i = 0; i < n; i++)
        strcat(s, line);
    strcat(s, tail);
    return s;
}

static void test_cases(void)
{
    char buf[1024];
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const struct dcase *c = &cases[i];
        unsigned lines[8] = {0};
        int n = lines_of(c->src, c->code, lines);
        bool ok;
        if (c->line) {
            ok = false;
            for (int k = 0; k < n && k < 8; k++)
                ok |= lines[k] == c->line;
        } else {
            ok = n == 0;
        }
        if (!ok) {
            dump(c->src, buf, sizeof(buf));
            printf("# %s: %s\n", c->what, buf);
        }
        CHECK(ok, "%s %s: %s", c->code, c->line ? "found" : "quiet", c->what);
    }
}

/* Forms of real configurations (found by running over a dump of the standard subsystems
 * library): what must stay quiet. */
static void test_real_world(void)
{
    unsigned lines[8];
    const char *blank = "Функция Т()\n\tВозврат \"ВЫБРАТЬ\n\n\t|\tПоле\n\t|ИЗ Т\";\nКонецФункции\n";
    CHECK(lines_of(blank, "ParseError", lines) == 0, "an empty line inside a query text");
    const char *prose = "Процедура А()\n\t// Если объект удалялся, тогда\n\t// нужен новый.\n"
                        "\t//  - для обмена (без правил);\n\tЗаписать();\nКонецПроцедуры\n";
    CHECK(lines_of(prose, "CommentedCode", lines) == 0,
          "prose with Если..., тогда and a list item");
    const char *vardoc = "// Пример:\n//   Кэш = Новый Соответствие;\nПерем Кэш Экспорт;\n";
    CHECK(lines_of(vardoc, "CommentedCode", lines) == 0, "a module variable's description");
    /* a form's module: its properties and attributes go by bare names */
    const char *form =
        "&НаСервере\nПроцедура ПриСозданииНаСервере(Отказ, СтандартнаяОбработка)\n"
        "\tМодифицированность = Ложь;\n\tКонтрагент = Параметры.Контрагент;\n"
        "\tЛишняя = 1;\nКонецПроцедуры\n&НаКлиенте\nПроцедура Обновить(Команда)\n"
        "\tКонтрагент = Неопределено;\nКонецПроцедуры\n"
        "&НаКлиенте\nПроцедура Показать(Результат, Параметр)\n\tЗаписать();\nКонецПроцедуры\n";
    struct bsl_diags d = {.attributes = true};
    struct bsl_err err = {0};
    CHECK(bsl_analyze(form, strlen(form), all, &d, &err) == 0, "a form module");
    int unused = 0, params = 0;
    for (size_t i = 0; i < d.n; i++) {
        unused += d.v[i].id == D_UNUSED_LOCAL_VARIABLE;
        params += d.v[i].id == D_UNUSED_PARAMETERS;
        if (d.v[i].id == D_UNUSED_LOCAL_VARIABLE)
            CHECK(d.v[i].range.start.line == 5, "form: only Лишняя is a local (line %u)",
                  d.v[i].range.start.line);
    }
    CHECK(unused == 1 && params == 0,
          "form: properties, attributes and client handlers' parameters are not faults");
    bsl_diags_free(&d);
    CHECK(bsl_module_kind("/w/Documents/Заказ/Forms/ФормаДокумента/Ext/Form/Module.bsl") &&
              bsl_module_kind("/w/Documents/Заказ/Ext/ObjectModule.bsl") &&
              !bsl_module_kind("/w/CommonModules/Общий/Ext/Module.bsl"),
          "module kinds from the dump's paths");
}

static void test_metrics(void)
{
    unsigned lines[8];
    /* MethodSize: 201 lines of body */
    char *big = repeat("Процедура Длинная()\n", "\tЗаписать();\n", 201, "КонецПроцедуры\n");
    CHECK(lines_of(big, "MethodSize", lines) == 1 && lines[0] == 1, "MethodSize: 203 lines found");
    free(big);
    char *small = repeat("Procedure Short()\n", "\tWrite();\n", 150, "EndProcedure\n");
    CHECK(lines_of(small, "MethodSize", lines) == 0, "MethodSize: 152 lines quiet");
    free(small);
    /* CognitiveComplexity: nested ifs and loops */
    const char *complex = "Процедура Сложная(А, Б, В)\n"
                          "\tДля Каждого Э Из А Цикл\n"  /* +1 */
                          "\t\tЕсли Э И Б Или В Тогда\n" /* +2 (nesting 1) +2 (И, Или) */
                          "\t\t\tПока Б Цикл\n"          /* +3 */
                          "\t\t\t\tЕсли В Тогда\n"       /* +4 */
                          "\t\t\t\t\tБ = ?(В, 1, 2);\n"  /* +5 */
                          "\t\t\t\tИначеЕсли А Тогда\n"  /* +1 */
                          "\t\t\t\t\tПрервать;\n"
                          "\t\t\t\tИначе\n" /* +1 */
                          "\t\t\t\t\tПродолжить;\n"
                          "\t\t\t\tКонецЕсли;\n"
                          "\t\t\tКонецЦикла;\n"
                          "\t\tКонецЕсли;\n"
                          "\tКонецЦикла;\n"
                          "КонецПроцедуры\n";
    CHECK(lines_of(complex, "CognitiveComplexity", lines) == 1 && lines[0] == 1,
          "CognitiveComplexity: 19 found");
    const char *simple =
        "Procedure Simple(A)\n\tIf A Then\n\t\tWrite();\n\tElse\n\t\tFor Each X In A Do\n"
        "\t\t\tWrite(X);\n\t\tEndDo;\n\tEndIf;\nEndProcedure\n";
    CHECK(lines_of(simple, "CognitiveComplexity", lines) == 0, "CognitiveComplexity: 4 quiet");
}

static void test_lexer(void)
{
    struct bsl_lexed lx;
    struct bsl_err err = {0};
    const char *src = "\xEF\xBB\xBF&НаСервере\nПРОЦЕДУРА Тест() ЭКСПОРТ // комм\n"
                      "\tТ = \"ВЫБРАТЬ\n\t|\tПоле\n\t|ИЗ Т\"\"\"; Д = '20240131';\n"
                      "#Область Имя\n~М: Ё = ё <> 1.5;\nКонецПроцедуры";
    CHECK(bsl_lex(src, strlen(src), &lx, &err) == 0, "lex: ok");
    const struct bsl_token *t = lx.toks;
    CHECK(t[0].type == TK_DIRECTIVE && t[0].start.line == 1 && t[0].start.col == 1,
          "lex: a directive at 1:1 after the BOM");
    CHECK(t[1].type == TK_KEYWORD && t[1].kw == KW_PROCEDURE, "lex: ПРОЦЕДУРА is a keyword");
    CHECK(t[2].type == TK_IDENT && t[2].start.col == 11, "lex: columns count code points");
    CHECK(t[5].type == TK_KEYWORD && t[5].kw == KW_EXPORT, "lex: ЭКСПОРТ");
    size_t s = 0;
    for (size_t i = 0; i < lx.ntoks; i++)
        if (lx.toks[i].type == TK_STRING)
            s = i;
    CHECK(s && lx.toks[s].start.line == 3 && lx.toks[s].end.line == 5 &&
              !(lx.toks[s].flags & BSL_TF_UNTERMINATED),
          "lex: a string over three lines with | and \"\"");
    CHECK(lx.toks[s + 4].type == TK_DATE, "lex: a date literal");
    CHECK(lx.ncomments == 1 && !lx.comments[0].own_line, "lex: a trailing comment");
    CHECK(lx.npps == 1 && lx.pps[0].kind == PP_REGION && lx.pps[0].start.line == 6,
          "lex: #Область on line 6");
    size_t lab = 0;
    for (size_t i = 0; i < lx.ntoks; i++)
        if (lx.toks[i].type == TK_LABEL)
            lab = i;
    CHECK(lab && lx.toks[lab + 2].hash == lx.toks[lab + 4].hash, "lex: Ё and ё are one name");
    CHECK(lx.toks[lab + 5].type == TK_OP && lx.toks[lab + 5].op == OP_NE, "lex: <>");
    CHECK(lx.toks[lab + 6].type == TK_NUMBER && lx.toks[lab + 6].len == 3, "lex: 1.5");
    CHECK(lx.toks[lx.ntoks - 1].type == TK_EOF, "lex: ends with EOF");
    CHECK(lx.nlines == 8, "lex: 8 lines (got %zu)", lx.nlines);
    bsl_lexed_free(&lx);

    CHECK(bsl_keyword("КОНЕЦЕСЛИ", strlen("КОНЕЦЕСЛИ")) == KW_ENDIF, "keyword: КОНЕЦЕСЛИ");
    CHECK(bsl_keyword("endif", 5) == KW_ENDIF, "keyword: endif");
    CHECK(bsl_keyword("ДляКаждого", strlen("ДляКаждого")) == KW_NONE, "keyword: not a joined pair");
    CHECK(bsl_name_eq("ёЛкА", strlen("ёЛкА"), "ЁлКа", strlen("ЁлКа")), "names: Cyrillic case");

    const char *bad = "А = \"не закрыта\nБ = 1;";
    CHECK(bsl_lex(bad, strlen(bad), &lx, &err) == 0 && (lx.toks[2].flags & BSL_TF_UNTERMINATED) &&
              lx.toks[3].start.line == 2,
          "lex: an unterminated string ends at its line");
    bsl_lexed_free(&lx);
    char invalid[] = {'\xff', '\xfe', 'A', '"', '\xc3', 0};
    CHECK(bsl_lex(invalid, strlen(invalid), &lx, &err) == 0, "lex: invalid UTF-8 is tokens");
    bsl_lexed_free(&lx);
}

static void test_recovery(void)
{
    unsigned lines[8];
    /* a broken statement, then good code whose faults are still found */
    const char *src = "Процедура А()\n"
                      "\tБ = (1 + ;\n"
                      "\tВ = 2;\n"
                      "КонецПроцедуры\n"
                      "\n"
                      "Функция Г()\n"
                      "\tЗаписать();\n"
                      "КонецФункции\n";
    CHECK(lines_of(src, "ParseError", lines) >= 1 && lines[0] == 2,
          "recovery: the error at line 2");
    CHECK(lines_of(src, "FunctionShouldHaveReturn", lines) == 1 && lines[0] == 6,
          "recovery: the next method is still checked");
    CHECK(lines_of(src, "UnusedLocalVariable", lines) >= 1, "recovery: the rest of the method too");
    /* a method without its end: the next method starts anyway */
    const char *noend = "Procedure A()\n\tWrite();\n\nProcedure B()\n\tReturn 1;\nEndProcedure\n";
    CHECK(lines_of(noend, "ParseError", lines) == 2 && lines[0] == 1 && lines[1] == 4,
          "recovery: missing EndProcedure, at the Procedure and where it ended");
    CHECK(lines_of(noend, "ProcedureReturnsValue", lines) == 1 && lines[0] == 5,
          "recovery: B is parsed");
    /* mismatched block ends */
    const char *mis = "Процедура А(Б)\n\tЕсли Б Тогда\n\t\tПока Б Цикл\n\t\t\tБ = "
                      "1;\n\tКонецЕсли;\nКонецПроцедуры\n";
    CHECK(lines_of(mis, "ParseError", lines) == 2 && lines[0] == 3 && lines[1] == 5,
          "recovery: КонецЦикла missing, at the Пока and where it ended");
    CHECK(lines_of(mis, "SemicolonPresence", lines) == 0, "recovery: no SemicolonPresence then");
    /* a missing Тогда or ; is reported on the line that lacks it */
    const char *then =
        "Procedure A(B)\n\tIf B = 1\n\t\tB = 2;\n\tEndIf;\n\tB = 3\n\tWrite(B);\nEndProcedure\n";
    CHECK(lines_of(then, "ParseError", lines) == 2 && lines[0] == 2 && lines[1] == 5,
          "recovery: missing Then and ; at their lines");
    const char *open = "Процедура А()\n\tС = \"не закрыта;\n\tЗаписать(С);\nКонецПроцедуры\n";
    CHECK(lines_of(open, "ParseError", lines) == 1 && lines[0] == 2, "an unterminated string");
    const char *stray = "Процедура А()\n\tКонецЦикла;\n\tЗаписать();\nКонецПроцедуры\n";
    CHECK(lines_of(stray, "ParseError", lines) == 1 && lines[0] == 2,
          "recovery: a stray КонецЦикла");
    /* deep nesting is an error, not a crash */
    char *deep = repeat("А = ", "(", 5000, "1;\n");
    CHECK(lines_of(deep, "ParseError", lines) >= 1, "recovery: 5000 parentheses");
    free(deep);
    /* a long a + b + ... chain: the checks walk it, so past BSL_TREE_HEIGHT_MAX it is an
     * error (and no stack overflow) */
    char *chain = repeat("А = ", "1 + ", 20000, "1;\n");
    CHECK(lines_of(chain, "ParseError", lines) == 1, "recovery: a 20000-term chain is refused");
    free(chain);
    chain = repeat("А = ", "\"а\" + ", 3000, "\"б\";\n");
    CHECK(lines_of(chain, "ParseError", lines) == 0, "parse: a 3000-term concatenation");
    free(chain);
    /* the language's forms parse cleanly */
    const char *full =
        "#Использовать lib\n"
        "Перем Глоб Экспорт;\n"
        "&НаСервереБезКонтекста\n"
        "Асинх Функция Ф(Знач А = 1, Б = Неопределено) Экспорт\n"
        "\tМ = Новый Массив;\n\tМ.Добавить(Новый Структура(\"А\", 1));\n"
        "\tТ = Новый(\"Массив\");\n\tЖдать Т.Метод();\n"
        "\tДля И1 = 1 По М.Количество() - 1 Цикл\n\t\tМ[И1] = -М[И1] % 2;\n\tКонецЦикла;\n"
        "\tДобавитьОбработчик Т.Событие, Обработчик;\n"
        "\tВыполнить(\"А = 1\");\n"
        "\tЕсли НЕ (А > 1 ИЛИ Б <= 2) И А <> Б Тогда\n\t\tВызватьИсключение(\"т\", "
        "1);\n\tКонецЕсли;\n"
        "\tВозврат М.Получить(А, , Б);\n"
        "КонецФункции\n";
    CHECK(lines_of(full, "ParseError", lines) == 0, "parse: the language's forms (ru)");
    const char *fullen = "Var G Export;\n"
                         "&AtClient\n"
                         "Procedure P(Val A, B = 1) Export\n"
                         "\tWhile A Do\n\t\tIf B Then\n\t\t\tBreak;\n\t\tElsIf NOT A "
                         "Then\n\t\t\tContinue;\n\t\tElse\n\t\t\tA = False;\n\t\tEndIf;\n\tEndDo;\n"
                         "\tTry\n\t\tExecute(\"x\");\n\tExcept\n\t\tRaise;\n\tEndTry;\n"
                         "\tRemoveHandler A.Ev, B;\n"
                         "EndProcedure\n";
    CHECK(lines_of(fullen, "ParseError", lines) == 0, "parse: the language's forms (en)");
    const char *more = "Перем Таблица[2, 3];\n"
                       "Процедура Выполнить() Экспорт\n\tПерем М[10];\n\tМ[0] = Таблица;\n"
                       "\tНовый Структура().Вставить(\"А\", М);\n\tВыполнить();\n"
                       "\tВыполнить(\"Б = 1\");\nКонецПроцедуры\n";
    CHECK(lines_of(more, "ParseError", lines) == 0,
          "parse: Перем М[10], Новый ... as a statement, a OneScript method named Выполнить");
}

static void test_codes(void)
{
    CHECK(D_COUNT_ >= 20, "at least 20 diagnostics (%d)", D_COUNT_);
    for (int i = 0; i < D_COUNT_; i++) {
        const struct bsl_diag_info *d = bsl_diag_info(i);
        CHECK(bsl_diag_by_code(d->code, strlen(d->code)) == i, "code %s maps back", d->code);
    }
    /* only the selected diagnostics run */
    bool only[D_COUNT_] = {0};
    only[D_SEMICOLON_PRESENCE] = true;
    struct bsl_diags d = {0};
    struct bsl_err err = {0};
    const char *src = "процедура А()\n\tБ = 1\nКонецПроцедуры\n";
    CHECK(bsl_analyze(src, strlen(src), only, &d, &err) == 0 && d.n == 1 &&
              d.v[0].id == D_SEMICOLON_PRESENCE,
          "a filter keeps only its codes");
    bsl_diags_free(&d);
}

static void test_scope(void)
{
    bool on[D_COUNT_];
    bsl_scope("/w/x/Module.bsl", all, on);
    CHECK(on[D_DEPRECATED_MESSAGE], "scope: DeprecatedMessage for .bsl");
    bsl_scope("/w/script.OS", all, on);
    CHECK(!on[D_DEPRECATED_MESSAGE] && on[D_UNUSED_PARAMETERS],
          "scope: not for OneScript, where Сообщить is the console");
}

/* tests/bsl/: modules written as a reviewer would, in both languages, with known faults
 * (expected.txt) and clean ones: every fault at its line, and nothing else anywhere. */
static void test_folder(void)
{
    FILE *f = fopen("tests/bsl/expected.txt", "r");
    CHECK(f != NULL, "tests/bsl/expected.txt (run from the repository)");
    if (!f)
        return;
    char want[64][160], line[256];
    size_t nwant = 0;
    while (fgets(line, sizeof(line), f) && nwant < 64) {
        char file[96], code[48];
        unsigned ln;
        if (line[0] != '#' && sscanf(line, "%95s %47s %u", file, code, &ln) == 3)
            snprintf(want[nwant++], sizeof(want[0]), "%s %s %u", file, code, ln);
    }
    fclose(f);
    struct bsl_paths paths = {0};
    struct bsl_err err = {0};
    CHECK(bsl_walk("tests/bsl", &paths, &err) == 0 && paths.n >= 5, "tests/bsl: modules found");
    bool found[64] = {0};
    size_t extra = 0;
    for (size_t i = 0; i < paths.n; i++) {
        char *buf = NULL;
        size_t len = 0;
        struct bsl_diags d = {0};
        bool on[D_COUNT_];
        bsl_scope(paths.v[i], all, on);
        if (bsl_read_file(paths.v[i], &buf, &len, &err) < 0 ||
            bsl_analyze(buf, len, on, &d, &err) < 0) {
            CHECK(0, "%s analysed", paths.v[i]);
            free(buf);
            continue;
        }
        const char *base = strrchr(paths.v[i], '/') ? strrchr(paths.v[i], '/') + 1 : paths.v[i];
        for (size_t k = 0; k < d.n; k++) {
            char got[160];
            snprintf(got, sizeof(got), "%s %s %u", base, bsl_diag_info(d.v[k].id)->code,
                     d.v[k].range.start.line);
            bool expected = false;
            for (size_t w = 0; w < nwant; w++)
                if (!strcmp(want[w], got)) {
                    found[w] = expected = true;
                }
            if (!expected) {
                extra++;
                printf("# not expected: %s (%s)\n", got, d.v[k].msg);
            }
        }
        bsl_diags_free(&d);
        free(buf);
    }
    for (size_t w = 0; w < nwant; w++)
        CHECK(found[w], "tests/bsl: %s", want[w]);
    CHECK(nwant >= 30, "tests/bsl: %zu faults expected", nwant);
    CHECK_EQ_INT(extra, 0,
                 "tests/bsl: no diagnostic beyond the known faults (clean modules quiet)");
    bsl_paths_free(&paths);
}

static void test_report(void)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    struct bsl_report r;
    bsl_report_begin(&r, f, BSL_FORMAT_JSON, 1, "/w");
    struct bsl_diags d = {0};
    struct bsl_err err = {0};
    const char *src = "Процедура А()\n\tБ = 1\nКонецПроцедуры\n";
    bsl_analyze(src, strlen(src), all, &d, &err);
    bsl_report_file(&r, "/w/a \"q\".bsl", &d, 3);
    CHECK(bsl_report_end(&r) == 0, "report: written");
    fclose(f);
    CHECK(strstr(buf, "\"fileinfos\":[") && strstr(buf, "\"path\":\"/w/a \\\"q\\\".bsl\""),
          "report: fileinfos with the escaped path");
    CHECK(strstr(buf, "\"range\":{\"start\":{\"line\":1,"), "report: 0-based LSP range");
    CHECK(strstr(buf, "\"line\":2,\"column\":"), "report: 1-based line and column");
    CHECK(strstr(buf, "\"truncated\":true") && strstr(buf, "\"written\":1"),
          "report: bounded by max_results, counted in full");
    CHECK(strstr(buf, "\"by_severity\":{\"Error\":"), "report: a summary by severity");
    free(buf);
    /* max_bytes: the report stops whole before the bound */
    buf = NULL;
    f = open_memstream(&buf, &len);
    bsl_report_begin(&r, f, BSL_FORMAT_JSON, BSL_RESULTS_MAX, "/w");
    bsl_report_max_bytes(&r, BSL_REPORT_MIN_BYTES);
    for (int i = 0; i < 200; i++)
        bsl_report_file(&r, "/w/a.bsl", &d, 3);
    CHECK(bsl_report_end(&r) == 0, "report: bounded by bytes");
    fclose(f);
    CHECK(len <= BSL_REPORT_MIN_BYTES && r.truncated && r.written > 10 && r.written < 200 * d.n,
          "report: %zu bytes, %zu written of %zu", len, r.written, r.total);
    CHECK(buf[len - 2] == '}' && buf[len - 3] == '}', "report: still closed");
    free(buf);
    bsl_diags_free(&d);
}

int main(void)
{
    for (int i = 0; i < D_COUNT_; i++)
        all[i] = true;
    test_lexer();
    test_recovery();
    test_cases();
    test_metrics();
    test_codes();
    test_scope();
    test_real_world();
    test_folder();
    test_report();
    return CHECK_DONE();
}
