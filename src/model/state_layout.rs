//! [`StateLayout`]: what a model carries from one token to the next, as named regions per layer.
//!
//! A region is either fixed in size whatever the history (a Mamba block's conv window and SSM
//! state) or grows by the same number of floats with every token (the key/value cache of an
//! attention block, to come). Everything that stores or counts a state derives from this one
//! description: the CPU [`State`](crate::model::State), the GPU's capture areas and checkpoint
//! slots, the checkpoint cache's byte accounting and the exported format.
//!
//! The flat order (a checkpoint slot's and an export's) groups the regions by name, in the
//! order the names first appear, then by layer: for today's models every layer's conv window,
//! then every layer's SSM state — the order earlier builds exported, so their states import.

/// How big a region is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Extent {
    /// The same number of floats whatever the history.
    Fixed(usize),
    /// This many floats per token of history.
    PerToken(usize),
}

/// One layer's region of the state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Region {
    /// The layer it belongs to.
    pub(crate) layer: usize,
    /// What it is, as its block kind names it (`"conv"`, `"ssm"`).
    pub(crate) name: &'static str,
    /// Its size.
    pub(crate) extent: Extent,
}

/// Every region of a model's state, in flat order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StateLayout {
    regions: Vec<Region>,
    /// Per layer, the indices into `regions` of its regions, in the block kind's order.
    by_layer: Vec<Vec<usize>>,
    /// Per region, where it starts in the flat fixed part (fixed regions only; 0 otherwise).
    offsets: Vec<usize>,
    fixed_floats: usize,
}

impl StateLayout {
    /// The layout of a model whose layer `i` has the regions `per_layer[i]` (name and extent, in
    /// its block kind's order).
    pub(crate) fn new(per_layer: &[Vec<(&'static str, Extent)>]) -> Self {
        let mut names: Vec<&'static str> = Vec::new();
        for (name, _) in per_layer.iter().flatten() {
            if !names.contains(name) {
                names.push(name);
            }
        }
        // Fixed regions first (grouped by name, then by layer), then the growing ones.
        let mut regions = Vec::new();
        for fixed in [true, false] {
            for &name in &names {
                for (layer, list) in per_layer.iter().enumerate() {
                    for &(n, extent) in list {
                        if n == name && matches!(extent, Extent::Fixed(_)) == fixed {
                            regions.push(Region { layer, name, extent });
                        }
                    }
                }
            }
        }
        let mut by_layer = vec![Vec::new(); per_layer.len()];
        for (layer, list) in per_layer.iter().enumerate() {
            for &(name, _) in list {
                let at = regions.iter().position(|r| r.layer == layer && r.name == name);
                by_layer[layer].extend(at);
            }
        }
        let (mut offsets, mut fixed_floats) = (Vec::with_capacity(regions.len()), 0);
        for r in &regions {
            offsets.push(fixed_floats);
            if let Extent::Fixed(n) = r.extent {
                fixed_floats += n;
            }
        }
        Self { regions, by_layer, offsets, fixed_floats }
    }

    /// Every region, in flat order.
    pub(crate) fn regions(&self) -> &[Region] {
        &self.regions
    }

    /// Layers.
    pub(crate) fn layers(&self) -> usize {
        self.by_layer.len()
    }

    /// Layer `layer`'s regions in its block kind's order.
    pub(crate) fn layer(&self, layer: usize) -> impl Iterator<Item = &Region> {
        self.by_layer[layer].iter().map(|&i| &self.regions[i])
    }

    /// Where fixed region `name` of `layer` starts in the flat state, if it has one.
    pub(crate) fn offset(&self, layer: usize, name: &str) -> Option<usize> {
        let i = self.by_layer.get(layer)?.iter().copied().find(|&i| self.regions[i].name == name)?;
        matches!(self.regions[i].extent, Extent::Fixed(_)).then_some(self.offsets[i])
    }

    /// Floats of the fixed part: the whole state of a model without growing regions.
    pub(crate) fn fixed_floats(&self) -> usize {
        self.fixed_floats
    }

    /// Floats the growing regions add per token of history.
    pub fn per_token_floats(&self) -> usize {
        self.regions
            .iter()
            .map(|r| match r.extent {
                Extent::PerToken(n) => n,
                Extent::Fixed(_) => 0,
            })
            .sum()
    }

    /// Floats of all of region `name`'s fixed regions together (one GPU buffer holds them).
    pub(crate) fn floats_named(&self, name: &str) -> usize {
        self.regions
            .iter()
            .filter(|r| r.name == name)
            .map(|r| match r.extent {
                Extent::Fixed(n) => n,
                Extent::PerToken(_) => 0,
            })
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fixed_regions_group_by_name_then_layer_and_growing_ones_follow() {
        let mamba = vec![("conv", Extent::Fixed(6)), ("ssm", Extent::Fixed(16))];
        let attention = vec![("k", Extent::PerToken(4)), ("v", Extent::PerToken(4))];
        let l = StateLayout::new(&[mamba.clone(), attention, mamba]);
        let order: Vec<(usize, &str)> = l.regions().iter().map(|r| (r.layer, r.name)).collect();
        assert_eq!(order, [(0, "conv"), (2, "conv"), (0, "ssm"), (2, "ssm"), (1, "k"), (1, "v")]);
        assert_eq!(l.offset(2, "conv"), Some(6));
        assert_eq!(l.offset(2, "ssm"), Some(28));
        assert_eq!(l.offset(1, "k"), None);
        assert_eq!(l.fixed_floats(), 44);
        assert_eq!(l.layer(2).map(|r| r.name).collect::<Vec<_>>(), ["conv", "ssm"]);
        assert_eq!(l.floats_named("ssm"), 32);
    }
}
