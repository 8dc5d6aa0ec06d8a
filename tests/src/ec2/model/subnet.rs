//! A subnet's address accounting as AWS keeps it: the network address, the next three and the
//! broadcast address reserved (5 per subnet), every other address held by at most one ENI,
//! `availableIpAddressCount` = size − 5 − held, single addresses handed out lowest first,
//! /28 prefixes aligned and wholly free, IPv6 /80 prefixes from the subnet's /64. Knows nothing
//! of ENIs beyond their ids.

use std::{
    collections::{BTreeMap, btree_map::Entry},
    net::{Ipv4Addr, Ipv6Addr},
};

use ipnet::{Ipv4Net, Ipv6Net};

use crate::ec2::scenario::Tags;

/// Addresses AWS reserves in every subnet.
pub const RESERVED: u64 = 5;

/// Addresses in an IPv4 prefix (a /28).
pub const PREFIX_SIZE: u32 = 16;

/// A subnet and who holds each of its addresses.
#[derive(Clone, Debug)]
pub struct Subnet {
    /// `subnet-…`.
    pub id: String,
    /// Its VPC.
    pub vpc: String,
    /// Its CIDR.
    pub cidr: Ipv4Net,
    /// Availability zone.
    pub az: String,
    /// Tags.
    pub tags: Tags,
    /// Its IPv6 /64, if any.
    pub ipv6: Option<Ipv6Net>,
    /// Held address → holder (an ENI id, or a filler a test put there).
    pub held: BTreeMap<u32, String>,
    /// IPv6 /80s handed out so far.
    pub ipv6_prefixes: u64,
    /// No free address below this one.
    hint: u32,
}

impl Subnet {
    /// An empty subnet.
    #[must_use]
    pub fn new(
        id: String,
        vpc: String,
        cidr: Ipv4Net,
        az: String,
        tags: Tags,
        ipv6: Option<Ipv6Net>,
    ) -> Self {
        let hint = u32::from(cidr.network());
        Self {
            id,
            vpc,
            cidr,
            az,
            tags,
            ipv6,
            held: BTreeMap::new(),
            ipv6_prefixes: 0,
            hint,
        }
    }

    fn first_usable(&self) -> u32 {
        u32::from(self.cidr.network()) + 4
    }

    fn last_usable(&self) -> u32 {
        u32::from(self.cidr.broadcast()) - 1
    }

    /// `availableIpAddressCount`.
    #[must_use]
    pub fn free(&self) -> u64 {
        let size = 1u64 << (32 - self.cidr.prefix_len());
        size.saturating_sub(RESERVED)
            .saturating_sub(self.held.len() as u64)
    }

    /// Whether `ip` is one AWS can hand out here (inside, not reserved).
    #[must_use]
    pub fn usable(&self, ip: Ipv4Addr) -> bool {
        let n = u32::from(ip);
        self.cidr.contains(&ip) && (self.first_usable()..=self.last_usable()).contains(&n)
    }

    /// Hold `ip` for `holder`; false when it is held, reserved or outside.
    pub fn hold(&mut self, ip: Ipv4Addr, holder: &str) -> bool {
        if !self.usable(ip) || self.held.contains_key(&u32::from(ip)) {
            return false;
        }
        self.held.insert(u32::from(ip), holder.to_owned());
        true
    }

    /// Hold the lowest `count` free addresses for `holder`, all or none.
    pub fn take(&mut self, count: u32, holder: &str) -> Option<Vec<Ipv4Addr>> {
        if u64::from(count) > self.free() {
            return None;
        }
        let mut out = Vec::with_capacity(count as usize);
        let mut n = self.hint.max(self.first_usable());
        while out.len() < count as usize && n <= self.last_usable() {
            if let Entry::Vacant(slot) = self.held.entry(n) {
                slot.insert(holder.to_owned());
                out.push(Ipv4Addr::from(n));
            }
            n += 1;
        }
        self.hint = n;
        if out.len() < count as usize {
            self.release(&out);
            return None;
        }
        Some(out)
    }

    /// Hold `count` aligned /28s, each wholly free, for `holder`, all or none.
    pub fn take_prefixes(&mut self, count: u32, holder: &str) -> Option<Vec<Ipv4Net>> {
        let mut out = Vec::with_capacity(count as usize);
        let base = u32::from(self.cidr.network());
        let end = u32::from(self.cidr.broadcast());
        let mut block = base;
        while out.len() < count as usize
            && block.checked_add(PREFIX_SIZE - 1).is_some_and(|b| b <= end)
        {
            let last = block + PREFIX_SIZE - 1;
            let clear = block >= self.first_usable()
                && last <= self.last_usable()
                && self.held.range(block..=last).next().is_none();
            if clear {
                for n in block..=last {
                    self.held.insert(n, holder.to_owned());
                }
                out.push(Ipv4Net::new(Ipv4Addr::from(block), 28).expect("/28 is a valid length"));
            }
            block += PREFIX_SIZE;
        }
        if out.len() < count as usize {
            for p in &out {
                self.release_prefix(*p);
            }
            return None;
        }
        Some(out)
    }

    /// Give back addresses.
    pub fn release(&mut self, ips: &[Ipv4Addr]) {
        for ip in ips {
            let n = u32::from(*ip);
            self.held.remove(&n);
            self.hint = self.hint.min(n);
        }
    }

    /// Give back a /28.
    pub fn release_prefix(&mut self, prefix: Ipv4Net) {
        let ips: Vec<Ipv4Addr> = prefix.hosts().collect();
        self.release(&ips);
        // `hosts()` skips a /28's network and broadcast addresses; both are held too.
        self.release(&[prefix.network(), prefix.broadcast()]);
    }

    /// The next IPv6 /80 from the subnet's /64.
    pub fn take_ipv6_prefix(&mut self) -> Option<Ipv6Net> {
        let net = self.ipv6?;
        let n = self.ipv6_prefixes.checked_add(1)?;
        if n > 0xffff {
            return None;
        }
        self.ipv6_prefixes = n;
        let base = u128::from(net.network()) | (u128::from(n) << 48);
        Ipv6Net::new(Ipv6Addr::from(base), 80).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn subnet(cidr: &str) -> Subnet {
        Subnet::new(
            "s".into(),
            "v".into(),
            cidr.parse().expect("cidr"),
            "a".into(),
            Tags::new(),
            None,
        )
    }

    #[test]
    fn five_addresses_are_reserved_and_none_is_handed_out_twice() {
        let mut s = subnet("10.0.0.0/28");
        assert_eq!(s.free(), 11);
        let ips = s.take(11, "e").expect("11 free");
        assert_eq!(ips.first(), Some(&"10.0.0.4".parse().expect("ip")));
        assert_eq!(ips.last(), Some(&"10.0.0.14".parse().expect("ip")));
        assert_eq!(s.free(), 0);
        assert!(s.take(1, "e").is_none());
        s.release(&ips[3..4]);
        assert_eq!(s.take(1, "f"), Some(vec!["10.0.0.7".parse().expect("ip")]));
    }

    #[test]
    fn prefixes_are_aligned_wholly_free_and_avoid_reserved_addresses() {
        let mut s = subnet("10.0.0.0/26");
        // The first /28 holds .0-.3, the last the broadcast: two /28s are left.
        let p = s.take_prefixes(2, "e").expect("two /28s");
        assert_eq!(
            p,
            vec![
                "10.0.0.16/28".parse().expect("net"),
                "10.0.0.32/28".parse().expect("net")
            ]
        );
        assert!(s.take_prefixes(1, "e").is_none());
        assert_eq!(s.free(), 64 - 5 - 32);
        s.release_prefix(p[0]);
        assert_eq!(s.free(), 64 - 5 - 16);
        assert!(s.hold("10.0.0.20".parse().expect("ip"), "x"));
        assert!(
            s.take_prefixes(1, "e").is_none(),
            "a held address breaks the block"
        );
    }
}
