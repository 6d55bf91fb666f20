"""A small .pptx writer (Office Open XML, PresentationML) using only the standard library:
title slides and bullet slides on one master, one layout and a theme."""
import zipfile
from xml.sax.saxutils import escape

NS = ('xmlns:a="http://schemas.openxmlformats.org/drawingml/2006/main" '
      'xmlns:r="http://schemas.openxmlformats.org/officeDocument/2006/relationships" '
      'xmlns:p="http://schemas.openxmlformats.org/presentationml/2006/main"')
REL = "http://schemas.openxmlformats.org/officeDocument/2006/relationships"
PKG_REL = "http://schemas.openxmlformats.org/package/2006/relationships"
CX, CY = 12192000, 6858000  # 16:9, EMU

CONTENT_TYPES = """<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types">
<Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/>
<Default Extension="xml" ContentType="application/xml"/>
<Override PartName="/ppt/presentation.xml" ContentType="application/vnd.openxmlformats-officedocument.presentationml.presentation.main+xml"/>
<Override PartName="/ppt/slideMasters/slideMaster1.xml" ContentType="application/vnd.openxmlformats-officedocument.presentationml.slideMaster+xml"/>
<Override PartName="/ppt/slideLayouts/slideLayout1.xml" ContentType="application/vnd.openxmlformats-officedocument.presentationml.slideLayout+xml"/>
<Override PartName="/ppt/theme/theme1.xml" ContentType="application/vnd.openxmlformats-officedocument.theme+xml"/>
%s
</Types>"""

THEME = """<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<a:theme xmlns:a="http://schemas.openxmlformats.org/drawingml/2006/main" name="sbx">
<a:themeElements>
<a:clrScheme name="sbx"><a:dk1><a:srgbClr val="000000"/></a:dk1><a:lt1><a:srgbClr val="FFFFFF"/></a:lt1>
<a:dk2><a:srgbClr val="1F2937"/></a:dk2><a:lt2><a:srgbClr val="F3F4F6"/></a:lt2>
<a:accent1><a:srgbClr val="2563EB"/></a:accent1><a:accent2><a:srgbClr val="16A34A"/></a:accent2>
<a:accent3><a:srgbClr val="DC2626"/></a:accent3><a:accent4><a:srgbClr val="D97706"/></a:accent4>
<a:accent5><a:srgbClr val="7C3AED"/></a:accent5><a:accent6><a:srgbClr val="0891B2"/></a:accent6>
<a:hlink><a:srgbClr val="2563EB"/></a:hlink><a:folHlink><a:srgbClr val="7C3AED"/></a:folHlink></a:clrScheme>
<a:fontScheme name="sbx"><a:majorFont><a:latin typeface="DejaVu Sans"/><a:ea typeface=""/><a:cs typeface=""/></a:majorFont>
<a:minorFont><a:latin typeface="DejaVu Sans"/><a:ea typeface=""/><a:cs typeface=""/></a:minorFont></a:fontScheme>
<a:fmtScheme name="sbx"><a:fillStyleLst><a:solidFill><a:schemeClr val="phClr"/></a:solidFill><a:solidFill><a:schemeClr val="phClr"/></a:solidFill><a:solidFill><a:schemeClr val="phClr"/></a:solidFill></a:fillStyleLst>
<a:lnStyleLst><a:ln w="9525"><a:solidFill><a:schemeClr val="phClr"/></a:solidFill></a:ln><a:ln w="25400"><a:solidFill><a:schemeClr val="phClr"/></a:solidFill></a:ln><a:ln w="38100"><a:solidFill><a:schemeClr val="phClr"/></a:solidFill></a:ln></a:lnStyleLst>
<a:effectStyleLst><a:effectStyle><a:effectLst/></a:effectStyle><a:effectStyle><a:effectLst/></a:effectStyle><a:effectStyle><a:effectLst/></a:effectStyle></a:effectStyleLst>
<a:bgFillStyleLst><a:solidFill><a:schemeClr val="phClr"/></a:solidFill><a:solidFill><a:schemeClr val="phClr"/></a:solidFill><a:solidFill><a:schemeClr val="phClr"/></a:solidFill></a:bgFillStyleLst></a:fmtScheme>
</a:themeElements></a:theme>"""

MASTER = """<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<p:sldMaster %s><p:cSld><p:spTree><p:nvGrpSpPr><p:cNvPr id="1" name=""/><p:cNvGrpSpPr/><p:nvPr/></p:nvGrpSpPr><p:grpSpPr/></p:spTree></p:cSld>
<p:clrMap bg1="lt1" tx1="dk1" bg2="lt2" tx2="dk2" accent1="accent1" accent2="accent2" accent3="accent3" accent4="accent4" accent5="accent5" accent6="accent6" hlink="hlink" folHlink="folHlink"/>
<p:sldLayoutIdLst><p:sldLayoutId id="2147483649" r:id="rId1"/></p:sldLayoutIdLst></p:sldMaster>""" % NS

LAYOUT = """<?xml version="1.0" encoding="UTF-8" standalone="yes"?>
<p:sldLayout %s type="blank"><p:cSld name="Blank"><p:spTree><p:nvGrpSpPr><p:cNvPr id="1" name=""/><p:cNvGrpSpPr/><p:nvPr/></p:nvGrpSpPr><p:grpSpPr/></p:spTree></p:cSld>
<p:clrMapOvr><a:masterClrMapping/></p:clrMapOvr></p:sldLayout>""" % NS


def _rels(items):
    body = "".join('<Relationship Id="%s" Type="%s" Target="%s"/>' % i for i in items)
    return ('<?xml version="1.0" encoding="UTF-8" standalone="yes"?>'
            '<Relationships xmlns="%s">%s</Relationships>' % (PKG_REL, body))


def _box(shape_id, name, x, y, w, h, paras, size):
    ps = "".join(
        '<a:p>%s<a:r><a:rPr lang="ro-RO" sz="%d"/><a:t>%s</a:t></a:r></a:p>'
        % ('<a:pPr marL="342900" indent="-342900"><a:buChar char="&#8226;"/></a:pPr>'
           if bullet else "", size, escape(text))
        for text, bullet in paras)
    return ('<p:sp><p:nvSpPr><p:cNvPr id="%d" name="%s"/><p:cNvSpPr txBox="1"/><p:nvPr/></p:nvSpPr>'
            '<p:spPr><a:xfrm><a:off x="%d" y="%d"/><a:ext cx="%d" cy="%d"/></a:xfrm>'
            '<a:prstGeom prst="rect"><a:avLst/></a:prstGeom></p:spPr>'
            '<p:txBody><a:bodyPr wrap="square"/><a:lstStyle/>%s</p:txBody></p:sp>'
            % (shape_id, name, x, y, w, h, ps))


class Deck:
    def __init__(self):
        self.slides = []

    def title_slide(self, title, subtitle=""):
        shapes = [_box(2, "Title", 838200, 2130000, CX - 1676400, 1470000, [(title, False)], 4400)]
        if subtitle:
            shapes.append(_box(3, "Subtitle", 838200, 3700000, CX - 1676400, 1000000,
                               [(subtitle, False)], 2400))
        self.slides.append(shapes)

    def bullet_slide(self, title, bullets):
        self.slides.append([
            _box(2, "Title", 838200, 365125, CX - 1676400, 1325563, [(title, False)], 3600),
            _box(3, "Body", 838200, 1825625, CX - 1676400, 4351338,
                 [(b, True) for b in bullets], 2400)])

    def save(self, path):
        n = len(self.slides)
        overrides = "".join(
            '<Override PartName="/ppt/slides/slide%d.xml" ContentType="application/'
            'vnd.openxmlformats-officedocument.presentationml.slide+xml"/>' % (i + 1)
            for i in range(n))
        pres = ('<?xml version="1.0" encoding="UTF-8" standalone="yes"?><p:presentation %s>'
                '<p:sldMasterIdLst><p:sldMasterId id="2147483648" r:id="rId1"/></p:sldMasterIdLst>'
                '<p:sldIdLst>%s</p:sldIdLst><p:sldSz cx="%d" cy="%d"/><p:notesSz cx="6858000" '
                'cy="9144000"/></p:presentation>'
                % (NS, "".join('<p:sldId id="%d" r:id="rId%d"/>' % (256 + i, i + 2)
                               for i in range(n)), CX, CY))
        pres_rels = [("rId1", REL + "/slideMaster", "slideMasters/slideMaster1.xml")]
        pres_rels += [("rId%d" % (i + 2), REL + "/slide", "slides/slide%d.xml" % (i + 1))
                      for i in range(n)]
        pres_rels.append(("rId%d" % (n + 2), REL + "/theme", "theme/theme1.xml"))
        with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
            z.writestr("[Content_Types].xml", CONTENT_TYPES % overrides)
            z.writestr("_rels/.rels", _rels([("rId1", REL + "/officeDocument",
                                              "ppt/presentation.xml")]))
            z.writestr("ppt/presentation.xml", pres)
            z.writestr("ppt/_rels/presentation.xml.rels", _rels(pres_rels))
            z.writestr("ppt/theme/theme1.xml", THEME)
            z.writestr("ppt/slideMasters/slideMaster1.xml", MASTER)
            z.writestr("ppt/slideMasters/_rels/slideMaster1.xml.rels", _rels([
                ("rId1", REL + "/slideLayout", "../slideLayouts/slideLayout1.xml"),
                ("rId2", REL + "/theme", "../theme/theme1.xml")]))
            z.writestr("ppt/slideLayouts/slideLayout1.xml", LAYOUT)
            z.writestr("ppt/slideLayouts/_rels/slideLayout1.xml.rels", _rels([
                ("rId1", REL + "/slideMaster", "../slideMasters/slideMaster1.xml")]))
            for i, shapes in enumerate(self.slides):
                z.writestr("ppt/slides/slide%d.xml" % (i + 1),
                           '<?xml version="1.0" encoding="UTF-8" standalone="yes"?><p:sld %s>'
                           '<p:cSld><p:spTree><p:nvGrpSpPr><p:cNvPr id="1" name=""/>'
                           '<p:cNvGrpSpPr/><p:nvPr/></p:nvGrpSpPr><p:grpSpPr/>%s</p:spTree>'
                           '</p:cSld><p:clrMapOvr><a:masterClrMapping/></p:clrMapOvr></p:sld>'
                           % (NS, "".join(shapes)))
                z.writestr("ppt/slides/_rels/slide%d.xml.rels" % (i + 1), _rels([
                    ("rId1", REL + "/slideLayout", "../slideLayouts/slideLayout1.xml")]))


def read_text(path):
    """Each slide's text runs, in slide order: [[str, ...], ...]."""
    import re
    import xml.etree.ElementTree as ET
    a = "{http://schemas.openxmlformats.org/drawingml/2006/main}"
    with zipfile.ZipFile(path) as z:
        names = sorted((n for n in z.namelist() if re.match(r"ppt/slides/slide\d+\.xml$", n)),
                       key=lambda n: int(re.findall(r"\d+", n)[-1]))
        return [[t.text or "" for t in ET.fromstring(z.read(n)).iter(a + "t")] for n in names]
