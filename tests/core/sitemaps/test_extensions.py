"""Google's image, video and news extensions out of place: a field inside another
extension's element, an element nested in any other, an element the extension does not
define. Each is left out with an error line; the entry and its other extensions are read,
and nothing raises."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from polite.sitemaps import parse

HEAD = ('<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9" '
        'xmlns:image="http://www.google.com/schemas/sitemap-image/1.1" '
        'xmlns:video="http://www.google.com/schemas/sitemap-video/1.1" '
        'xmlns:news="http://www.google.com/schemas/sitemap-news/0.9">\n')


def urlset(*bodies: str) -> bytes:
    return (HEAD + "".join(f"<url><loc>https://a.example/{i}</loc>{body}</url>\n"
                           for i, body in enumerate(bodies)) + "</urlset>\n").encode()


VIDEO = ("<video:content_loc>https://a.example/v.mp4</video:content_loc>"
         "<video:title>V</video:title>")


def test_image_and_news_fields_inside_a_video_are_left_out_with_an_error() -> None:
    sitemap = parse(urlset(
        f"<video:video>{VIDEO}<image:loc>https://a.example/i</image:loc></video:video>",
        f"<video:video>{VIDEO}<image:caption>c</image:caption></video:video>",
        f"<video:video>{VIDEO}<news:name>N</news:name><news:language>en</news:language>"
        "</video:video>"))
    entries = list(sitemap)
    assert [e.loc for e in entries] == [f"https://a.example/{i}" for i in range(3)]
    for entry in entries:
        (video,) = entry.videos
        assert (video.content_loc, video.title) == ("https://a.example/v.mp4", "V")
        assert entry.images == () and entry.news is None
    assert [(i.line, i.code, i.message) for i in sitemap.issues] == [
        (2, "bad-extension", "<image:loc> outside any <image:image>; left out"),
        (3, "bad-extension", "<image:caption> outside any <image:image>; left out"),
        (4, "bad-extension", "<news:name> outside any <news:news>; left out"),
    ]


def test_a_field_of_one_family_does_not_fill_another_familys_element() -> None:
    # an image inside a video: the image is read, the video keeps only its own fields
    (entry,) = parse(urlset(
        f"<video:video><image:image><image:loc>https://a.example/i</image:loc></image:image>"
        f"{VIDEO}</video:video>"))
    assert [i.loc for i in entry.images] == ["https://a.example/i"]
    assert [v.content_loc for v in entry.videos] == ["https://a.example/v.mp4"]


def test_an_element_the_extension_does_not_define_is_reported() -> None:
    sitemap = parse(urlset(
        "<image:image><image:loc>https://a.example/i</image:loc><image:size>9</image:size>"
        "</image:image>",
        "<news:news><news:publication><news:name>N</news:name></news:publication>"
        "<news:title>T</news:title><news:author>A</news:author></news:news>"))
    first, second = sitemap
    assert [i.loc for i in first.images] == ["https://a.example/i"]
    assert second.news is not None and (second.news.name, second.news.title) == ("N", "T")
    assert [(i.line, i.code, i.message) for i in sitemap.issues] == [
        (2, "bad-extension", "<image:size> is not an element of the image extension; "
                             "left out"),
        (3, "bad-extension", "<news:author> is not an element of the news extension; "
                             "left out"),
    ]


ELEMENTS = ["image:image", "image:loc", "image:caption", "image:title", "image:license",
            "image:geo_location", "image:size", "video:video", "video:content_loc",
            "video:player_loc", "video:title", "video:duration", "video:rating",
            "video:price", "video:tag", "video:live", "video:publication_date",
            "video:restriction", "video:id", "news:news", "news:publication", "news:name",
            "news:language", "news:title", "news:publication_date", "news:keywords",
            "news:genres", "news:stock_tickers", "news:access", "news:author"]
VALUES = st.sampled_from(["", "https://a.example/x", "12", "5.5", "yes", "2024-01-02",
                          "a, b", "x y"])


def _tree(depth: int) -> st.SearchStrategy[str]:
    leaf = st.builds(lambda name, value: f"<{name}>{value}</{name}>",
                     st.sampled_from(ELEMENTS), VALUES)
    if depth == 0:
        return leaf
    inner = st.lists(_tree(depth - 1), max_size=3).map("".join)
    nested = st.builds(lambda name, body: f"<{name}>{body}</{name}>",
                       st.sampled_from(ELEMENTS), inner)
    return st.one_of(leaf, nested)


@settings(max_examples=300, deadline=None)
@given(st.lists(_tree(3), min_size=1, max_size=4).map("".join))
def test_any_extension_element_nested_in_any_other_never_raises(body: str) -> None:
    sitemap = parse(urlset(body, "<image:image><image:loc>https://a.example/ok</image:loc>"
                                 "</image:image>"))
    entries = list(sitemap)
    # both entries are read, whatever the first one holds
    assert [e.loc for e in entries] == ["https://a.example/0", "https://a.example/1"]
    assert [i.loc for i in entries[1].images] == ["https://a.example/ok"]
    for image in entries[0].images:
        assert image.loc
    assert all(i.line == 2 for i in sitemap.issues), sitemap.issues
