#!/usr/bin/env python3
"""sbx-bsl's throughput (docs/bsl.md): a generated configuration dump of BSL and OneScript
modules in both keyword languages, analysed with every diagnostic on, in MB/s beside `wc -l`
and `cat` over the same files in the same run.

    python3 bench/bench_bsl.py [--build build] [--mb 20] [-n 5]

Not part of the tests; needs only build/sbx-bsl.
"""

import argparse
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)

RU_METHOD = """\
// Обрабатывает документы {i}.
//
// Параметры:
//  Ссылка - ДокументСсылка - документ.
//  Режим - Число - режим обработки.
//
&НаСервере
Функция Обработать{i}(Знач Ссылка, Режим = 0) Экспорт
\tРезультат = Новый Структура("Сумма, Количество", 0, 0);
\tЗапрос = Новый Запрос;
\tЗапрос.Текст = "ВЫБРАТЬ
\t|\tТовары.Номенклатура КАК Номенклатура,
\t|\tСУММА(Товары.Сумма) КАК Сумма
\t|ИЗ
\t|\tДокумент.Реализация.Товары КАК Товары
\t|ГДЕ
\t|\tТовары.Ссылка = &Ссылка
\t|СГРУППИРОВАТЬ ПО
\t|\tТовары.Номенклатура";
\tЗапрос.УстановитьПараметр("Ссылка", Ссылка);
\tВыборка = Запрос.Выполнить().Выбрать();
\tПока Выборка.Следующий() Цикл
\t\tЕсли Выборка.Сумма > 1000 И Режим = 1 Тогда
\t\t\tРезультат.Сумма = Результат.Сумма + Выборка.Сумма;
\t\tИначеЕсли Выборка.Сумма < 0 Тогда
\t\t\tПродолжить;
\t\tИначе
\t\t\tРезультат.Количество = Результат.Количество + 1;
\t\tКонецЕсли;
\tКонецЦикла;
\tДля Каждого Строка Из Ссылка.Товары Цикл
\t\tПопытка
\t\t\tРезультат.Сумма = Результат.Сумма + ?(Строка.Сумма > 0, Строка.Сумма, 0);
\t\tИсключение
\t\t\tЗаписьЖурналаРегистрации("Обработка", УровеньЖурналаРегистрации.Ошибка, , ,
\t\t\t\tПодробноеПредставлениеОшибки(ИнформацияОбОшибке()));
\t\tКонецПопытки;
\tКонецЦикла;
\tДата = '20240131';
\tВозврат Результат;
КонецФункции

"""

EN_METHOD = """\
// Totals the rows {i}.
Procedure Total{i}(Rows, Val Mode) Export
\tVar Sum;
\tSum = 0;
\tFor Index = 0 To Rows.Count() - 1 Do
\t\tRow = Rows[Index];
\t\tIf Row.Amount > 0 AND NOT Row.Skip Then
\t\t\tSum = Sum + Row.Amount;
\t\tElsIf Mode = 2 Then
\t\t\tBreak;
\t\tElse
\t\t\tContinue;
\t\tEndIf;
\tEndDo;
\tWhile Sum > 100 Do
\t\tSum = Sum / 2;
\tEndDo;
\tRows.Insert(0, New Structure("Sum", Sum));
EndProcedure

"""


def generate(root, mb):
    """Modules of 20..200 methods under a dump-like tree until mb megabytes."""
    rnd = random.Random(46)
    total, k, files = 0, 0, []
    while total < mb * 1024 * 1024:
        ru = k % 3 != 2
        folder = os.path.join(root, "CommonModules" if ru else "scripts", "M%05d" % k, "Ext")
        os.makedirs(folder, exist_ok=True)
        path = os.path.join(folder, "Module.bsl" if ru else "module.os")
        parts = ["#Область ПрограммныйИнтерфейс\n\n" if ru else "#Region Public\n\n"]
        for i in range(rnd.randint(20, 200)):
            parts.append((RU_METHOD if ru else EN_METHOD).replace("{i}", str(i)))
        parts.append("#КонецОбласти\n" if ru else "#EndRegion\n")
        data = "".join(parts).encode("utf-8")
        with open(path, "wb") as f:
            f.write(b"\xef\xbb\xbf" + data)
        files.append(path)
        total += len(data) + 3
        k += 1
    return files, total


def timed(argv, n, **kw):
    best = None
    for _ in range(n):
        t = time.perf_counter()
        subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, **kw)
        dt = time.perf_counter() - t
        best = dt if best is None else min(best, dt)
    return best


def run(build, n=5, mb=20):
    """[(name, MB/s)], notes."""
    bsl = os.path.join(build, "sbx-bsl")
    tmp = tempfile.mkdtemp(prefix="sbx-bench-bsl-")
    try:
        files, total = generate(tmp, mb)
        size = total / 1e6
        t_bsl = timed([bsl, "--max-results", "1", tmp], n)
        t_text = timed([bsl, "--format", "text", tmp], n)
        t_wc = timed(["wc", "-l"] + files, n)
        t_cat = timed(["cat"] + files, n)
        out = subprocess.run([bsl, "--format", "text", tmp], check=True, capture_output=True,
                             text=True).stdout.strip().splitlines()[-1]
        rows = [("sbx-bsl (json, all diagnostics)", size / t_bsl),
                ("sbx-bsl (text, every line written)", size / t_text),
                ("wc -l (baseline)", size / t_wc), ("cat (baseline)", size / t_cat)]
        notes = ["%d modules, %.1f MB (best of %d runs each); %s" % (len(files), size, n, out)]
        return rows, notes
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default="build")
    ap.add_argument("--mb", type=int, default=20)
    ap.add_argument("-n", type=int, default=5)
    a = ap.parse_args()
    build = a.build if os.path.isabs(a.build) else os.path.join(REPO, a.build)
    rows, notes = run(build, a.n, a.mb)
    base = rows[2][1]
    print("%-38s %10s %12s" % ("sbx-bsl throughput", "MB/s", "x wc -l"))
    for name, v in rows:
        print("%-38s %10.1f %12.3f" % (name, v, v / base))
    for s in notes:
        print("note: " + s)
    return 0


if __name__ == "__main__":
    sys.exit(main())
