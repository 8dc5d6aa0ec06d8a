//! The AWS Query protocol's request body (EC2 and STS): `Action=…&Version=…&…` as
//! `application/x-www-form-urlencoded`, lists flattened with 1-based indexes
//! (`Filter.N.Name`, `Filter.N.Value.M`, `SecurityGroupId.N`,
//! `TagSpecification.N.Tag.M.Key`), booleans `true`/`false`, every byte but RFC 3986's
//! unreserved characters percent-encoded (botocore's `ec2`/`query` serializer). Pure: no
//! knowledge of which action takes which keys (that is `ops`'s).

use std::collections::BTreeMap;

use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};

/// The EC2 API version every request names.
pub const EC2_VERSION: &str = "2016-11-15";

/// Bytes escaped in keys and values: all but `A-Z a-z 0-9 - _ . ~`.
const ESCAPED: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'_')
    .remove(b'.')
    .remove(b'~');

/// One `Filter.N`: a name and the values any of which matches.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Filter {
    /// The filter name, e.g. `vpc-id` or `tag:Name`.
    pub name: String,
    /// Its values (`Filter.N.Value.M`).
    pub values: Vec<String>,
}

impl Filter {
    /// A filter on `name` matching any of `values`.
    #[must_use]
    pub fn new<I, S>(name: &str, values: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        Self {
            name: name.to_owned(),
            values: values.into_iter().map(Into::into).collect(),
        }
    }

    /// `tag:<key>` = `value`, one per tag.
    #[must_use]
    pub fn tags(tags: &BTreeMap<String, String>) -> Vec<Self> {
        tags.iter()
            .map(|(k, v)| Self::new(&format!("tag:{k}"), [v.as_str()]))
            .collect()
    }
}

/// A Query request body under construction; keys keep the order they were added in.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Query {
    params: Vec<(String, String)>,
}

impl Query {
    /// `Action=<action>&Version=<version>`.
    #[must_use]
    pub fn new(action: &str, version: &str) -> Self {
        Self {
            params: vec![
                ("Action".to_owned(), action.to_owned()),
                ("Version".to_owned(), version.to_owned()),
            ],
        }
    }

    /// An EC2 request (`Version=2016-11-15`).
    #[must_use]
    pub fn ec2(action: &str) -> Self {
        Self::new(action, EC2_VERSION)
    }

    /// `key=value`.
    #[must_use]
    pub fn param(mut self, key: &str, value: impl Into<String>) -> Self {
        self.params.push((key.to_owned(), value.into()));
        self
    }

    /// `key=value` when `value` is some.
    #[must_use]
    pub fn opt(self, key: &str, value: Option<impl Into<String>>) -> Self {
        match value {
            Some(v) => self.param(key, v),
            None => self,
        }
    }

    /// `key=true|false`.
    #[must_use]
    pub fn bool(self, key: &str, value: bool) -> Self {
        self.param(key, if value { "true" } else { "false" })
    }

    /// `prefix.1=…&prefix.2=…`.
    #[must_use]
    pub fn list<I, S>(mut self, prefix: &str, values: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        for (i, v) in values.into_iter().enumerate() {
            self.params.push((format!("{prefix}.{}", i + 1), v.into()));
        }
        self
    }

    /// `Filter.N.Name` and `Filter.N.Value.M`, numbered from the filters already added.
    #[must_use]
    pub fn filters(mut self, filters: &[Filter]) -> Self {
        let first = self
            .params
            .iter()
            .filter(|(k, _)| k.starts_with("Filter.") && k.ends_with(".Name"))
            .count();
        for (i, f) in filters.iter().enumerate() {
            let n = first + i + 1;
            self.params
                .push((format!("Filter.{n}.Name"), f.name.clone()));
            for (m, v) in f.values.iter().enumerate() {
                self.params
                    .push((format!("Filter.{n}.Value.{}", m + 1), v.clone()));
            }
        }
        self
    }

    /// `TagSpecification.1.ResourceType` and `TagSpecification.1.Tag.M.Key|Value`; nothing
    /// when `tags` is empty.
    #[must_use]
    pub fn tag_specification(
        mut self,
        resource_type: &str,
        tags: &BTreeMap<String, String>,
    ) -> Self {
        if tags.is_empty() {
            return self;
        }
        self.params.push((
            "TagSpecification.1.ResourceType".to_owned(),
            resource_type.to_owned(),
        ));
        for (m, (k, v)) in tags.iter().enumerate() {
            let m = m + 1;
            self.params
                .push((format!("TagSpecification.1.Tag.{m}.Key"), k.clone()));
            self.params
                .push((format!("TagSpecification.1.Tag.{m}.Value"), v.clone()));
        }
        self
    }

    /// The value of `key`, if set.
    #[must_use]
    pub fn get(&self, key: &str) -> Option<&str> {
        self.params
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// The same request with `key` set to `value` (replaced if present, else appended).
    #[must_use]
    pub fn with(mut self, key: &str, value: impl Into<String>) -> Self {
        let value = value.into();
        match self.params.iter_mut().find(|(k, _)| k == key) {
            Some(entry) => entry.1 = value,
            None => self.params.push((key.to_owned(), value)),
        }
        self
    }

    /// The action.
    #[must_use]
    pub fn action(&self) -> &str {
        self.get("Action").unwrap_or_default()
    }

    /// The form body.
    #[must_use]
    pub fn encode(&self) -> String {
        let mut out = String::new();
        for (i, (k, v)) in self.params.iter().enumerate() {
            if i > 0 {
                out.push('&');
            }
            out.extend(utf8_percent_encode(k, ESCAPED));
            out.push('=');
            out.extend(utf8_percent_encode(v, ESCAPED));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodes_like_botocore() {
        let tags = BTreeMap::from([
            ("cluster".to_owned(), "a b".to_owned()),
            ("io.cilium/eni".to_owned(), "x=y&z".to_owned()),
        ]);
        let cases: Vec<(Query, &str)> = vec![
            (
                Query::ec2("DescribeVpcs").list("VpcId", ["vpc-1"]),
                "Action=DescribeVpcs&Version=2016-11-15&VpcId.1=vpc-1",
            ),
            (
                Query::ec2("DescribeSubnets").filters(&[
                    Filter::new("vpc-id", ["vpc-1"]),
                    Filter::new("subnet-id", ["subnet-a", "subnet-b"]),
                ]),
                "Action=DescribeSubnets&Version=2016-11-15&Filter.1.Name=vpc-id&Filter.1.Value.1=vpc-1\
                 &Filter.2.Name=subnet-id&Filter.2.Value.1=subnet-a&Filter.2.Value.2=subnet-b",
            ),
            (
                Query::ec2("CreateNetworkInterface")
                    .param("SubnetId", "subnet-a")
                    .param("Description", "Cilium-CNI (i-0123)")
                    .list("SecurityGroupId", ["sg-1", "sg-2"])
                    .tag_specification("network-interface", &tags),
                "Action=CreateNetworkInterface&Version=2016-11-15&SubnetId=subnet-a\
                 &Description=Cilium-CNI%20%28i-0123%29&SecurityGroupId.1=sg-1&SecurityGroupId.2=sg-2\
                 &TagSpecification.1.ResourceType=network-interface\
                 &TagSpecification.1.Tag.1.Key=cluster&TagSpecification.1.Tag.1.Value=a%20b\
                 &TagSpecification.1.Tag.2.Key=io.cilium%2Feni&TagSpecification.1.Tag.2.Value=x%3Dy%26z",
            ),
            (
                Query::ec2("CreateNetworkInterface")
                    .tag_specification("network-interface", &BTreeMap::new()),
                "Action=CreateNetworkInterface&Version=2016-11-15",
            ),
            (
                Query::ec2("ModifyNetworkInterfaceAttribute")
                    .param("Attachment.AttachmentId", "eni-attach-1")
                    .bool("Attachment.DeleteOnTermination", true)
                    .bool("AllowReassociation", false),
                "Action=ModifyNetworkInterfaceAttribute&Version=2016-11-15\
                 &Attachment.AttachmentId=eni-attach-1&Attachment.DeleteOnTermination=true\
                 &AllowReassociation=false",
            ),
            (
                Query::ec2("DescribeNetworkInterfaces")
                    .filters(&Filter::tags(&tags))
                    .filters(&[Filter::new("status", ["available"])])
                    .opt("NextToken", Some("a+b/c=="))
                    .opt("MaxResults", None::<String>),
                "Action=DescribeNetworkInterfaces&Version=2016-11-15\
                 &Filter.1.Name=tag%3Acluster&Filter.1.Value.1=a%20b\
                 &Filter.2.Name=tag%3Aio.cilium%2Feni&Filter.2.Value.1=x%3Dy%26z\
                 &Filter.3.Name=status&Filter.3.Value.1=available&NextToken=a%2Bb%2Fc%3D%3D",
            ),
            (
                Query::ec2("UnassignPrivateIpAddresses")
                    .list("PrivateIpAddress", ["10.0.0.5", "10.0.0.6"])
                    .list("Ipv6Prefix", Vec::<String>::new()),
                "Action=UnassignPrivateIpAddresses&Version=2016-11-15\
                 &PrivateIpAddress.1=10.0.0.5&PrivateIpAddress.2=10.0.0.6",
            ),
            (
                Query::new("AssumeRoleWithWebIdentity", "2011-06-15")
                    .param("RoleArn", "arn:aws:iam::123:role/r")
                    .param("WebIdentityToken", "eyJ.a_b-c~d"),
                "Action=AssumeRoleWithWebIdentity&Version=2011-06-15\
                 &RoleArn=arn%3Aaws%3Aiam%3A%3A123%3Arole%2Fr&WebIdentityToken=eyJ.a_b-c~d",
            ),
            (
                Query::ec2("X").param("Unicode", "é"),
                "Action=X&Version=2016-11-15&Unicode=%C3%A9",
            ),
        ];
        for (query, want) in cases {
            assert_eq!(query.encode(), want, "{query:?}");
        }
    }

    #[test]
    fn with_replaces_or_appends() {
        let q = Query::ec2("DescribeSecurityGroups").param("NextToken", "a");
        let q = q.with("NextToken", "b").with("MaxResults", "1000");
        assert_eq!(
            q.encode(),
            "Action=DescribeSecurityGroups&Version=2016-11-15&NextToken=b&MaxResults=1000"
        );
        assert_eq!(q.action(), "DescribeSecurityGroups");
        assert_eq!(q.get("MaxResults"), Some("1000"));
        assert_eq!(q.get("Nope"), None);
    }
}
