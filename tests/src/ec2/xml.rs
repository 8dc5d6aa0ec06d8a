//! The XML EC2 answers: a small writer for elements, leaves and `<xxxSet><item>` lists with
//! text escaped, the 2016-11-15 namespace on the `<{Action}Response>` root and its
//! `<requestId>`, and ISO-8601 times as EC2 prints them. Knows nothing of the model.

use std::{
    fmt::Write as _,
    time::{SystemTime, UNIX_EPOCH},
};

/// The EC2 Query API namespace of every answer.
pub const NAMESPACE: &str = "http://ec2.amazonaws.com/doc/2016-11-15/";

/// Escape text for an element's content (`&`, `<`, `>`; quotes stay, as EC2 leaves them).
#[must_use]
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            c => out.push(c),
        }
    }
    out
}

/// An XML document being written.
#[derive(Debug, Default)]
pub struct Xml {
    out: String,
}

impl Xml {
    /// `<{action}Response xmlns=…><requestId>…</requestId>` + `body` + the closing tag.
    #[must_use]
    pub fn response(
        action: &str,
        namespace: &str,
        request_id: &str,
        body: impl FnOnce(&mut Self),
    ) -> String {
        let mut x = Self::default();
        let _ = write!(
            x.out,
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<{action}Response xmlns=\"{namespace}\">"
        );
        x.leaf("requestId", request_id);
        body(&mut x);
        let _ = write!(x.out, "</{action}Response>");
        x.out
    }

    /// A document with root `root` (no `requestId`; STS puts it elsewhere).
    #[must_use]
    pub fn document(root: &str, namespace: &str, body: impl FnOnce(&mut Self)) -> String {
        let mut x = Self::default();
        let _ = write!(
            x.out,
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<{root} xmlns=\"{namespace}\">"
        );
        body(&mut x);
        let _ = write!(x.out, "</{root}>");
        x.out
    }

    /// `<name>text</name>`.
    pub fn leaf(&mut self, name: &str, text: impl std::fmt::Display) -> &mut Self {
        let text = escape(&text.to_string());
        let _ = write!(self.out, "<{name}>{text}</{name}>");
        self
    }

    /// `<name>text</name>` when `text` is `Some`.
    pub fn opt(&mut self, name: &str, text: Option<impl std::fmt::Display>) -> &mut Self {
        if let Some(t) = text {
            self.leaf(name, t);
        }
        self
    }

    /// `<name>…</name>` with `body` inside.
    pub fn el(&mut self, name: &str, body: impl FnOnce(&mut Self)) -> &mut Self {
        let _ = write!(self.out, "<{name}>");
        body(self);
        let _ = write!(self.out, "</{name}>");
        self
    }

    /// `<name><item>…</item>…</name>` (`<name/>` when empty), one item per element.
    pub fn set<T>(
        &mut self,
        name: &str,
        items: impl IntoIterator<Item = T>,
        mut item: impl FnMut(&mut Self, T),
    ) -> &mut Self {
        let mut items = items.into_iter().peekable();
        if items.peek().is_none() {
            let _ = write!(self.out, "<{name}/>");
            return self;
        }
        let _ = write!(self.out, "<{name}>");
        for i in items {
            self.out.push_str("<item>");
            item(self, i);
            self.out.push_str("</item>");
        }
        let _ = write!(self.out, "</{name}>");
        self
    }

    /// `<tagSet>` of `key`/`value` items.
    pub fn tags<'a>(
        &mut self,
        tags: impl IntoIterator<Item = (&'a String, &'a String)>,
    ) -> &mut Self {
        self.set("tagSet", tags, |x, (k, v)| {
            x.leaf("key", k).leaf("value", v);
        })
    }
}

/// `time` as EC2 prints it: `2026-12-03T05:51:21.000Z`.
#[must_use]
pub fn iso8601(time: SystemTime) -> String {
    let secs = time.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let days = i64::try_from(secs / 86_400).unwrap_or(0);
    let rem = secs % 86_400;
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.000Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn iso8601_prints_utc_with_milliseconds() {
        assert_eq!(iso8601(UNIX_EPOCH), "1970-01-01T00:00:00.000Z");
        let t = UNIX_EPOCH + Duration::from_secs(1_796_277_081);
        assert_eq!(iso8601(t), "2026-12-03T05:51:21.000Z");
    }

    #[test]
    fn empty_sets_are_self_closing_and_text_is_escaped() {
        let doc = Xml::response("DescribeX", NAMESPACE, "r1", |x| {
            x.set("aSet", Vec::<u8>::new(), |_, _| {});
            x.set("bSet", ["<&>"], |x, v| {
                x.leaf("v", v);
            });
        });
        assert!(doc.contains("<aSet/>"), "{doc}");
        assert!(
            doc.contains("<bSet><item><v>&lt;&amp;&gt;</v></item></bSet>"),
            "{doc}"
        );
        assert!(doc.contains("<requestId>r1</requestId>"), "{doc}");
    }
}
