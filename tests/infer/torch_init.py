"""Seeded re-initialization of PyTorch models for tests and benchmarks that use
torchvision's networks with random weights (no downloads)."""
import torch


def randomize_batch_norms(model, seed):
    """Random BatchNorm statistics and affine parameters: with torchvision's
    initialization the eval-mode activations of mobilenet_v2 shrink to ~1e-10 (a 1e-4
    comparison would mean nothing) and ResNet-50's features hardly vary between inputs."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, torch.nn.BatchNorm2d):
                m.running_mean.copy_(torch.randn(m.num_features, generator=g) * 0.1)
                m.running_var.copy_(torch.rand(m.num_features, generator=g) * 0.5 + 0.5)
                m.weight.copy_(torch.rand(m.num_features, generator=g) * 0.5 + 0.75)
                m.bias.copy_(torch.randn(m.num_features, generator=g) * 0.1)
    return model
