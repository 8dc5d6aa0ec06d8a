//! The Query protocol's request side: the form body decoded into parameters, flattened lists
//! (`Name.1`, `Name.2`, …), `Filter.N.Name` + `Filter.N.Value.M` with EC2's matching (values
//! OR-ed, filters AND-ed, `*` and `?` wildcards), tag specifications, and `MaxResults` +
//! `NextToken` paging of a listing. Knows nothing of the model or of HTTP.

use std::collections::BTreeMap;

use super::error::Ec2Error;

/// A request's decoded form parameters.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Params(pub BTreeMap<String, String>);

impl Params {
    /// Decode an `application/x-www-form-urlencoded` body (or query string).
    #[must_use]
    pub fn parse(body: &[u8]) -> Self {
        Self(
            form_urlencoded::parse(body)
                .map(|(k, v)| (k.into_owned(), v.into_owned()))
                .collect(),
        )
    }

    /// One parameter.
    #[must_use]
    pub fn get(&self, name: &str) -> Option<&str> {
        self.0.get(name).map(String::as_str)
    }

    /// One parameter that must be present.
    ///
    /// # Errors
    /// `MissingParameter`.
    pub fn required(&self, name: &str) -> Result<&str, Ec2Error> {
        self.get(name)
            .filter(|v| !v.is_empty())
            .ok_or_else(|| Ec2Error::missing(name))
    }

    /// A number parameter, if present.
    ///
    /// # Errors
    /// `InvalidParameterValue` when it is not a number.
    pub fn number(&self, name: &str) -> Result<Option<u32>, Ec2Error> {
        self.get(name)
            .map(|v| v.parse().map_err(|_| Ec2Error::bad_value(name, v)))
            .transpose()
    }

    /// A boolean parameter (`true`/`false`), if present.
    ///
    /// # Errors
    /// `InvalidParameterValue` when it is neither.
    pub fn boolean(&self, name: &str) -> Result<Option<bool>, Ec2Error> {
        self.get(name)
            .map(|v| match v {
                "true" => Ok(true),
                "false" => Ok(false),
                _ => Err(Ec2Error::bad_value(name, v)),
            })
            .transpose()
    }

    /// A flattened list `prefix.1`, `prefix.2`, … in index order.
    #[must_use]
    pub fn list(&self, prefix: &str) -> Vec<String> {
        let dotted = format!("{prefix}.");
        let mut items: Vec<(u32, String)> = self
            .0
            .iter()
            .filter_map(|(k, v)| {
                let n = k.strip_prefix(&dotted)?.parse().ok()?;
                Some((n, v.clone()))
            })
            .collect();
        items.sort_by_key(|(n, _)| *n);
        items.into_iter().map(|(_, v)| v).collect()
    }

    /// The indexes `n` of a list of structures `prefix.n.…`, sorted.
    fn indexes(&self, prefix: &str) -> Vec<u32> {
        let dotted = format!("{prefix}.");
        let mut found: Vec<u32> = self
            .0
            .keys()
            .filter_map(|k| k.strip_prefix(&dotted)?.split('.').next()?.parse().ok())
            .collect();
        found.sort_unstable();
        found.dedup();
        found
    }

    /// `Filter.N.Name` with its `Filter.N.Value.M` values.
    #[must_use]
    pub fn filters(&self) -> Filters {
        Filters(
            self.indexes("Filter")
                .into_iter()
                .filter_map(|n| {
                    let name = self.get(&format!("Filter.{n}.Name"))?.to_owned();
                    Some((name, self.list(&format!("Filter.{n}.Value"))))
                })
                .collect(),
        )
    }

    /// Tags of the `TagSpecification.N` for `resource_type` (`Tag.M.Key`/`Tag.M.Value`).
    #[must_use]
    pub fn tag_specification(&self, resource_type: &str) -> BTreeMap<String, String> {
        let mut tags = BTreeMap::new();
        for n in self.indexes("TagSpecification") {
            if self.get(&format!("TagSpecification.{n}.ResourceType")) != Some(resource_type) {
                continue;
            }
            tags.extend(self.tags(&format!("TagSpecification.{n}.Tag")));
        }
        tags
    }

    /// `prefix.M.Key` / `prefix.M.Value` pairs.
    #[must_use]
    pub fn tags(&self, prefix: &str) -> BTreeMap<String, String> {
        self.indexes(prefix)
            .into_iter()
            .filter_map(|m| {
                let key = self.get(&format!("{prefix}.{m}.Key"))?.to_owned();
                let value = self
                    .get(&format!("{prefix}.{m}.Value"))
                    .unwrap_or("")
                    .to_owned();
                Some((key, value))
            })
            .collect()
    }

    /// `MaxResults` and `NextToken`, `MaxResults` checked against `min..=max`.
    ///
    /// # Errors
    /// `InvalidParameterValue` for a `MaxResults` out of range.
    pub fn paging(&self, min: u32, max: u32) -> Result<Paging, Ec2Error> {
        let max_results = self.number("MaxResults")?;
        if let Some(m) = max_results
            && !(min..=max).contains(&m)
        {
            return Err(Ec2Error::invalid_value(format!(
                "Value ( {m} ) for parameter maxResults is invalid. Expecting a value between {min} and {max}."
            )));
        }
        Ok(Paging {
            max_results,
            next_token: self
                .get("NextToken")
                .filter(|t| !t.is_empty())
                .map(str::to_owned),
        })
    }
}

/// `Filter.N`: (name, values).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Filters(pub Vec<(String, Vec<String>)>);

impl Filters {
    /// Check every filter name against `known` (exact names, or `tag:` for any `tag:K`).
    ///
    /// # Errors
    /// `InvalidParameterValue` naming the first unknown filter.
    pub fn check(&self, known: &[&str]) -> Result<(), Ec2Error> {
        for (name, _) in &self.0 {
            let ok = known
                .iter()
                .any(|k| k == name || (*k == "tag:" && name.starts_with("tag:")));
            if !ok {
                return Err(Ec2Error::unknown_filter(name));
            }
        }
        Ok(())
    }

    /// Whether an object passes every filter: `field(name)` gives the object's values for a
    /// filter name (any may match a filter value; none fails the filter).
    #[must_use]
    pub fn pass(&self, field: impl Fn(&str) -> Vec<String>) -> bool {
        self.0.iter().all(|(name, values)| {
            let have = field(name);
            values
                .iter()
                .any(|pattern| have.iter().any(|v| wildcard(pattern, v)))
        })
    }
}

/// EC2's filter-value match: `*` any run, `?` one character, the rest literal.
#[must_use]
pub fn wildcard(pattern: &str, text: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let t: Vec<char> = text.chars().collect();
    let (mut pi, mut ti) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while ti < t.len() {
        if pi < p.len() && (p[pi] == '?' || p[pi] == t[ti]) {
            pi += 1;
            ti += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some((pi, ti));
            pi += 1;
        } else if let Some((sp, st)) = star {
            pi = sp + 1;
            ti = st + 1;
            star = Some((sp, st + 1));
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|&c| c == '*')
}

/// A listing's `MaxResults` and `NextToken`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Paging {
    /// `MaxResults`, if sent.
    pub max_results: Option<u32>,
    /// `NextToken`, if sent.
    pub next_token: Option<String>,
}

impl Paging {
    /// The page of `items` this request asks for and the `nextToken` of the next one.
    /// Without `MaxResults`, every item, unless there are more than `unpaged_limit`:
    /// `OperationNotPermitted`.
    ///
    /// # Errors
    /// A token this emulator did not give, or a listing too large to answer unpaged.
    pub fn page<T>(
        &self,
        action: &str,
        mut items: Vec<T>,
        unpaged_limit: Option<usize>,
    ) -> Result<(Vec<T>, Option<String>), Ec2Error> {
        let start = match &self.next_token {
            None => 0,
            Some(token) => token
                .strip_prefix("weft-page-")
                .and_then(|n| n.parse::<usize>().ok())
                .filter(|&n| n <= items.len())
                .ok_or_else(|| Ec2Error::bad_next_token(token))?,
        };
        let Some(max) = self.max_results else {
            if let Some(limit) = unpaged_limit
                && items.len() > limit
            {
                return Err(Ec2Error::too_large(action, items.len()));
            }
            return Ok((items.split_off(start), None));
        };
        let end = (start + max as usize).min(items.len());
        let next = (end < items.len()).then(|| format!("weft-page-{end}"));
        items.truncate(end);
        Ok((items.split_off(start), next))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wildcards_match_like_ec2_filters() {
        assert!(wildcard("*", "10.0.0.1"));
        assert!(wildcard("10.0.*", "10.0.3.4"));
        assert!(wildcard("10.0.0.?", "10.0.0.7"));
        assert!(!wildcard("10.0.0.?", "10.0.0.17"));
        assert!(wildcard("a*b*c", "aXXbYYc"));
        assert!(!wildcard("a*b*c", "aXXbYY"));
        assert!(wildcard("", ""));
    }

    #[test]
    fn flattened_lists_and_filters_decode_in_index_order() {
        let p = Params::parse(
            b"Filter.2.Name=tag%3Ak&Filter.2.Value.1=v&Filter.1.Name=subnet-id&Filter.1.Value.2=b&Filter.1.Value.1=a&NetworkInterfaceId.10=x&NetworkInterfaceId.2=y",
        );
        assert_eq!(p.list("NetworkInterfaceId"), ["y", "x"]);
        let f = p.filters();
        assert_eq!(
            f.0[0],
            ("subnet-id".to_owned(), vec!["a".into(), "b".into()])
        );
        assert_eq!(f.0[1], ("tag:k".to_owned(), vec!["v".into()]));
    }

    #[test]
    fn pages_follow_tokens_and_unpaged_listings_can_be_refused() {
        let paging = Paging {
            max_results: Some(2),
            next_token: None,
        };
        let (page, next) = paging.page("X", vec![1, 2, 3], None).expect("page");
        assert_eq!((page, next.as_deref()), (vec![1, 2], Some("weft-page-2")));
        let paging = Paging {
            max_results: Some(2),
            next_token: next,
        };
        assert_eq!(
            paging.page("X", vec![1, 2, 3], None).expect("page"),
            (vec![3], None)
        );
        let unpaged = Paging::default();
        let e = unpaged
            .page("X", vec![1, 2, 3], Some(2))
            .expect_err("too large");
        assert_eq!(e.code, "OperationNotPermitted");
    }
}
