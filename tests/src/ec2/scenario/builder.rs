//! The Rust side of a [`Scenario`]: a builder for tests (`Scenario::new(region).vpc(…)
//! .subnet(…)…`) and the small example estate most tests start from. Builds values only.

use ipnet::Ipv4Net;
use serde_json::Value;

use super::{
    ElasticIpSpec, EniSpec, InstanceSpec, InstanceTypeSpec, RateLimitSpec, RouteTableSpec,
    Scenario, SecurityGroupSpec, SubnetSpec, Tags, VpcSpec, WebIdentitySpec,
};

impl Scenario {
    /// A small estate for tests: VPC `vpc-0a1b2c3d4e5f60001` 10.0.0.0/16 (+ 10.1.0.0/16),
    /// subnets `subnet-0a000000000000001` 10.0.0.0/24 (us-east-1a, `weft: nodes`) and
    /// `subnet-0a000000000000002` 10.0.1.0/26 (us-east-1a, `weft: pods`), one route table with
    /// both, security group `sg-0a000000000000001` (`weft: nodes`), instance
    /// `i-0a000000000000001` m5.large in the first subnet, and Elastic IP
    /// `eipalloc-0a000000000000001` 203.0.113.10 (`weft: egress`).
    #[must_use]
    pub fn example() -> Self {
        let tag = |v: &str| Tags::from([("weft".to_owned(), v.to_owned())]);
        Self::new("us-east-1")
            .vpc(EXAMPLE_VPC, "10.0.0.0/16", &["10.1.0.0/16"])
            .subnet(
                EXAMPLE_NODE_SUBNET,
                EXAMPLE_VPC,
                "10.0.0.0/24",
                "us-east-1a",
                tag("nodes"),
            )
            .subnet(
                EXAMPLE_POD_SUBNET,
                EXAMPLE_VPC,
                "10.0.1.0/26",
                "us-east-1a",
                tag("pods"),
            )
            .route_table(
                "rtb-0a000000000000001",
                EXAMPLE_VPC,
                &[EXAMPLE_NODE_SUBNET, EXAMPLE_POD_SUBNET],
            )
            .security_group(EXAMPLE_SG, EXAMPLE_VPC, tag("nodes"))
            .instance(
                EXAMPLE_INSTANCE,
                "m5.large",
                EXAMPLE_NODE_SUBNET,
                Tags::new(),
            )
            .elastic_ip("eipalloc-0a000000000000001", "203.0.113.10", tag("egress"))
    }

    /// Add a VPC.
    #[must_use]
    pub fn vpc(mut self, id: &str, cidr: &str, extra: &[&str]) -> Self {
        self.vpcs.push(VpcSpec {
            id: id.to_owned(),
            cidr: net(cidr),
            extra_cidrs: extra.iter().map(|c| net(c)).collect(),
            tags: Tags::new(),
        });
        self
    }

    /// Add a subnet.
    #[must_use]
    pub fn subnet(mut self, id: &str, vpc: &str, cidr: &str, az: &str, tags: Tags) -> Self {
        self.subnets.push(SubnetSpec {
            id: id.to_owned(),
            vpc: vpc.to_owned(),
            cidr: net(cidr),
            az: az.to_owned(),
            ipv6_cidr: None,
            tags,
        });
        self
    }

    /// Give the last subnet added an IPv6 /64.
    #[must_use]
    pub fn with_ipv6(mut self, cidr: &str) -> Self {
        let s = self.subnets.last_mut().expect("a subnet to give IPv6");
        s.ipv6_cidr = Some(cidr.parse().unwrap_or_else(|e| panic!("{cidr}: {e}")));
        self
    }

    /// Add a route table associated with `subnets`.
    #[must_use]
    pub fn route_table(mut self, id: &str, vpc: &str, subnets: &[&str]) -> Self {
        self.route_tables.push(RouteTableSpec {
            id: id.to_owned(),
            vpc: vpc.to_owned(),
            subnets: subnets.iter().map(|s| (*s).to_owned()).collect(),
            main: false,
        });
        self
    }

    /// Add a security group.
    #[must_use]
    pub fn security_group(mut self, id: &str, vpc: &str, tags: Tags) -> Self {
        self.security_groups.push(SecurityGroupSpec {
            id: id.to_owned(),
            vpc: vpc.to_owned(),
            name: None,
            tags,
        });
        self
    }

    /// Add an instance type (replacing one of the same name).
    #[must_use]
    pub fn instance_type(mut self, spec: InstanceTypeSpec) -> Self {
        self.instance_types.retain(|t| t.name != spec.name);
        self.instance_types.push(spec);
        self
    }

    /// Add a running instance with its primary ENI in `subnet`.
    #[must_use]
    pub fn instance(mut self, id: &str, instance_type: &str, subnet: &str, tags: Tags) -> Self {
        self.instances.push(InstanceSpec {
            tags,
            ..InstanceSpec::new(id, instance_type, subnet)
        });
        self
    }

    /// Edit the last instance added.
    #[must_use]
    pub fn with_instance(mut self, edit: impl FnOnce(&mut InstanceSpec)) -> Self {
        edit(self.instances.last_mut().expect("an instance to edit"));
        self
    }

    /// Add an Elastic IP.
    #[must_use]
    pub fn elastic_ip(mut self, allocation_id: &str, public_ip: &str, tags: Tags) -> Self {
        self.elastic_ips.push(ElasticIpSpec {
            allocation_id: allocation_id.to_owned(),
            public_ip: public_ip
                .parse()
                .unwrap_or_else(|e| panic!("{public_ip}: {e}")),
            tags,
            network_interface: None,
        });
        self
    }

    /// Add a detached ENI in `subnet` with `tags`.
    #[must_use]
    pub fn detached_eni(mut self, id: &str, subnet: &str, tags: Tags) -> Self {
        self.network_interfaces.push(EniSpec {
            id: id.to_owned(),
            subnet: subnet.to_owned(),
            description: String::new(),
            secondary_ips: 0,
            security_groups: Vec::new(),
            tags,
            attachment: None,
        });
        self
    }

    /// Serve IMDS for `instance`, requiring IMDSv2 tokens if `require_token`.
    #[must_use]
    pub fn imds(mut self, instance: &str, require_token: bool) -> Self {
        self.imds.instance = Some(instance.to_owned());
        self.imds.require_token = require_token;
        self
    }

    /// Enforce this IAM policy document.
    #[must_use]
    pub fn policy(mut self, document: Value) -> Self {
        self.policy = Some(document);
        self
    }

    /// Refuse unpaged listings longer than `limit` (`OperationNotPermitted`).
    #[must_use]
    pub fn unpaged_limit(mut self, limit: usize) -> Self {
        self.unpaged_limit = Some(limit);
        self
    }

    /// Throttle above `per_second` requests per second with a bucket of `burst`.
    #[must_use]
    pub fn rate_limit(mut self, per_second: f64, burst: u32) -> Self {
        self.rate_limit = Some(RateLimitSpec { per_second, burst });
        self
    }

    /// Accept only these access key ids (and STS-issued ones).
    #[must_use]
    pub fn access_keys(mut self, keys: &[&str]) -> Self {
        self.access_keys = keys.iter().map(|k| (*k).to_owned()).collect();
        self
    }

    /// Know the secret of `access_key`: its requests are accepted and their signatures verified.
    #[must_use]
    pub fn secret_key(mut self, access_key: &str, secret: &str) -> Self {
        self.secret_keys
            .insert(access_key.to_owned(), secret.to_owned());
        self
    }

    /// Accept web identity `tokens` for `role_arn` at STS.
    #[must_use]
    pub fn web_identity(mut self, role_arn: &str, tokens: &[&str]) -> Self {
        self.web_identity = Some(WebIdentitySpec {
            role_arn: role_arn.to_owned(),
            tokens: tokens.iter().map(|t| (*t).to_owned()).collect(),
        });
        self
    }
}

/// The VPC of [`Scenario::example`].
pub const EXAMPLE_VPC: &str = "vpc-0a1b2c3d4e5f60001";
/// The node subnet (10.0.0.0/24) of [`Scenario::example`].
pub const EXAMPLE_NODE_SUBNET: &str = "subnet-0a000000000000001";
/// The pod subnet (10.0.1.0/26) of [`Scenario::example`].
pub const EXAMPLE_POD_SUBNET: &str = "subnet-0a000000000000002";
/// The security group of [`Scenario::example`].
pub const EXAMPLE_SG: &str = "sg-0a000000000000001";
/// The m5.large instance of [`Scenario::example`].
pub const EXAMPLE_INSTANCE: &str = "i-0a000000000000001";

fn net(cidr: &str) -> Ipv4Net {
    cidr.parse().unwrap_or_else(|e| panic!("{cidr}: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_example_round_trips_through_yaml_for_the_program() {
        let example = Scenario::example().imds(EXAMPLE_INSTANCE, true);
        let yaml = serde_norway::to_string(&example).expect("serializes");
        let back = Scenario::from_yaml(&yaml).expect("parses");
        assert_eq!(
            serde_json::to_value(&back).ok(),
            serde_json::to_value(&example).ok()
        );
        crate::ec2::model::Model::new(&back).expect("a consistent estate");
    }
}
